#!/usr/bin/env python3
"""Does this replica lead? Asks the leader-sidecar next door.

Python 3.8 or later, standard library only. Copy this file next to your
application, then either run it:

    leader.py            prints "<token> <identity> <validForMs>", exits 0
                         while this replica leads, 1 while it does not, 2 when
                         the sidecar does not answer usably ("not leader" too)
    leader.py --wait     blocks until this replica leads (following
                         /leader/watch), then prints and exits as above

or import it:

    import leader
    term = leader.current_term()        # None unless this replica leads
    if term:
        write(..., token=term.token, holder=term.identity)  # checked by the resource
        if not term.valid():            # the claim lapsed meanwhile
            ...

A term's deadline is on time.monotonic(): validForMs counted from the moment
the request was sent, so it needs neither the sidecar's clock nor RFC 3339
parsing. It only narrows the window in which a paused process works as a
stale leader; the resource's check of the token (docs/fencing.md) is what
refuses a stale write.

LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import NamedTuple, Optional

DEFAULT_URL = "http://127.0.0.1:4040"
MAX_ANSWER = 64 << 10  # bytes; the sidecar's answers are far smaller

# The sidecar is next door: never through a proxy from the environment.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SidecarError(Exception):
    """The sidecar did not answer, or answered something unusable."""


class Term(NamedTuple):
    """A term this replica leads in: attach token and identity to writes."""

    token: int
    identity: str
    deadline: float  # time.monotonic() at which the claim lapses unless renewed

    def valid(self) -> bool:
        """Whether the claim has not lapsed yet (ask again to renew it)."""
        return time.monotonic() < self.deadline

    def valid_for_ms(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def _base(url: Optional[str]) -> str:
    return (url or os.environ.get("LEADER_SIDECAR_URL") or DEFAULT_URL).rstrip("/")


def _decode(body: bytes) -> dict:
    try:
        state = json.loads(body)
    except ValueError as e:
        raise SidecarError("not JSON: %r" % body[:200]) from e
    if not isinstance(state, dict) or not isinstance(state.get("leader"), bool):
        raise SidecarError("no leader field: %r" % body[:200])
    return state


def state(url: Optional[str] = None, timeout: float = 2.0) -> dict:
    """GET /leader: the sidecar's answer as a dict (see fence.LeaderJSON)."""
    try:
        with _opener.open(_base(url) + "/leader", timeout=timeout) as resp:
            body = resp.read(MAX_ANSWER + 1)
    except (OSError, urllib.error.URLError) as e:  # HTTPError is a URLError
        raise SidecarError("GET %s/leader: %s" % (_base(url), e)) from e
    if len(body) > MAX_ANSWER:
        raise SidecarError("answer larger than %d bytes" % MAX_ANSWER)
    return _decode(body)


def term_of(answer: dict, sent: float) -> Optional[Term]:
    """The term in a /leader answer obtained by a request sent at sent
    (time.monotonic()), or None if it does not lead."""
    if not answer["leader"]:
        return None
    token, identity, valid_for = answer.get("token"), answer.get("identity"), answer.get("validForMs")
    for name, value in (("token", token), ("validForMs", valid_for)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SidecarError("a leader answer with %s %r" % (name, value))
    if token < 1 or valid_for < 0 or not isinstance(identity, str) or not identity:
        raise SidecarError("a leader answer needs a token >= 1, an identity and validForMs >= 0: %r" % answer)
    return Term(token, identity, sent + valid_for / 1000.0)


def current_term(url: Optional[str] = None, timeout: float = 2.0) -> Optional[Term]:
    """The term this replica leads in now, or None. Raises SidecarError when
    the sidecar does not answer usably: take that as "not leader"."""
    sent = time.monotonic()
    return term_of(state(url, timeout), sent)


def wait_for_term(url: Optional[str] = None, idle_timeout: float = 45.0) -> Term:
    """Blocks until this replica leads, following GET /leader/watch (Server-
    Sent Events), then confirms with a fresh GET /leader, whose send time
    the deadline counts from. Raises SidecarError if the stream breaks or
    stays silent (no event, no keep-alive) for idle_timeout seconds."""
    try:
        resp = _opener.open(_base(url) + "/leader/watch", timeout=idle_timeout)
    except (OSError, urllib.error.URLError) as e:
        raise SidecarError("GET %s/leader/watch: %s" % (_base(url), e)) from e
    with resp:
        data = []
        try:
            for raw in resp:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                    continue
                if line or not data:
                    continue  # a comment (keep-alive), another field, or no event yet
                event, data = "\n".join(data), []
                if _decode(event.encode())["leader"]:
                    term = current_term(url)
                    if term is not None:
                        return term
        except OSError as e:
            raise SidecarError("the stream from the sidecar broke: %s" % e) from e
    raise SidecarError("the sidecar ended the stream")


def main(argv) -> int:
    wait = "--wait" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--wait"]
    if unknown:
        print("usage: leader.py [--wait]", file=sys.stderr)
        return 2
    try:
        term = wait_for_term() if wait else current_term()
    except SidecarError as e:
        print("leader.py: %s" % e, file=sys.stderr)
        return 2
    if term is None:
        return 1
    print(term.token, term.identity, term.valid_for_ms())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
