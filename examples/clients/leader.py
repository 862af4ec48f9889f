#!/usr/bin/env python3
"""Does this replica lead? Asks the leader-sidecar next door.

Python 3.8 or later, standard library only. Copy this file next to your
application, then either run it:

    leader.py            prints "<token> <identity> <validForMs>", exits 0
                         while this replica leads, 1 while it does not, 2 when
                         the sidecar does not answer usably ("not leader" too)
    leader.py --wait     blocks until this replica leads (following
                         /leader/watch), then prints and exits as above

In shard mode (the sidecar's --shards N), each shard has its own term:

    leader.py --shards          prints "<shard> <token> <state> <identity>" for
                                each shard held here (state "held", or
                                "draining": stop working on it, then
                                acknowledge), exits 0 while it holds one, 1
                                while it holds none, 2 as above
    leader.py --shard-selector  prints the shardSelector of the shards held
                                here, exits 0, 1 or 2 alike
    leader.py --watch-shards    follows /shards/watch and prints, flushed,
                                "<event> <shard> <token> <identity>" for each
                                acquired, draining, undrained, renewed,
                                released and lost; exits 2 when the stream
                                ends or breaks (what is held is then unknown)
    leader.py --drained I [T]   acknowledges the drain of shard I (POST
                                /shards/I/drained?token=T: the sidecar
                                releases it), in the term of token T if
                                given, exits 0, 1 when shard I does not
                                drain here (or in another term), 2 as above

or import it:

    import leader
    term = leader.current_term()        # None unless this replica leads
    if term:
        write(..., token=term.token, holder=term.identity)  # checked by the resource
        if not term.valid():            # the claim lapsed meanwhile
            ...

    guard = leader.ShardGuard()         # refuses a shard's older term
    shards = leader.shards()            # GET /shards
    for t in shards.held:               # ShardTerm: group, shard, token, holder, state, ...
        if t.valid():                   # held (not draining) and not lapsed
            guard.do(t, lambda: write(..., shard=t.shard, token=t.token, holder=t.holder))
    for ev in leader.watch_shards():    # ShardEvent (typed events) and Shards (states)
        if isinstance(ev, leader.ShardEvent) and ev.event == "draining":
            stop(ev.term.shard)
            leader.drained(ev.term.shard)

A term's deadline is on time.monotonic(): validForMs counted from the moment
the request was sent, so it needs neither the sidecar's clock nor RFC 3339
parsing. It only narrows the window in which a paused process works as a
stale leader; the resource's check of the token (docs/fencing.md) is what
refuses a stale write. A shard term's deadline is its validUntil, on the
wall clock (time.time()) that the sidecar next door shares.

ShardGuard is that check for data this process owns, per shard, as
pkg/fence's MemoryGuard.DoShard: a write presenting a shard's token lower
than the highest it accepted for that shard (or that token from another
holder) is refused with StaleTokenError. Data that lives elsewhere needs
the same check where it lives, atomically with the write (docs/fencing.md).

LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).
"""

import calendar
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import NamedTuple, Optional

DEFAULT_URL = "http://127.0.0.1:4040"
MAX_ANSWER = 64 << 10  # bytes; the sidecar's answers are far smaller
MAX_SHARDS_ANSWER = 1 << 20  # bytes; GET /shards of 256 shards is about 64 KiB

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


def _reason(e: urllib.error.HTTPError) -> str:
    """': <the sidecar's error>' of an error answer whose JSON body names
    one (a shard group's 409 says to ask GET /shards), else ''."""
    try:
        err = json.loads(e.read(MAX_ANSWER)).get("error")
    except Exception:  # not JSON, not an object: the status says enough
        return ""
    return ": %s" % err if isinstance(err, str) and err else ""


def _get(url: Optional[str], path: str, timeout: float, limit: int) -> bytes:
    try:
        with _opener.open(_base(url) + path, timeout=timeout) as resp:
            body = resp.read(limit + 1)
    except urllib.error.HTTPError as e:
        raise SidecarError("GET %s%s: %s%s" % (_base(url), path, e, _reason(e))) from e
    except (OSError, urllib.error.URLError) as e:
        raise SidecarError("GET %s%s: %s" % (_base(url), path, e)) from e
    if len(body) > limit:
        raise SidecarError("answer larger than %d bytes" % limit)
    return body


def state(url: Optional[str] = None, timeout: float = 2.0) -> dict:
    """GET /leader: the sidecar's answer as a dict (see fence.LeaderJSON)."""
    return _decode(_get(url, "/leader", timeout, MAX_ANSWER))


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


def _events(url: Optional[str], path: str, idle_timeout: float):
    """Yields (event name, data) for each Server-Sent Event of GET path, the
    name "" for an event without an event: field. Raises SidecarError if the
    stream cannot be opened, breaks, ends or stays silent (no event, no
    keep-alive) for idle_timeout seconds."""
    try:
        resp = _opener.open(_base(url) + path, timeout=idle_timeout)
    except (OSError, urllib.error.URLError) as e:
        raise SidecarError("GET %s%s: %s" % (_base(url), path, e)) from e
    with resp:
        name, data = "", []
        try:
            for raw in resp:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line.startswith("event:"):
                    name = line[6:].strip(" ")
                elif not line:
                    if data:
                        yield name, "\n".join(data)
                    name, data = "", []
                # else a comment (keep-alive) or another field
        except OSError as e:
            raise SidecarError("the stream from the sidecar broke: %s" % e) from e
    raise SidecarError("the sidecar ended the stream")


def wait_for_term(url: Optional[str] = None, idle_timeout: float = 45.0) -> Term:
    """Blocks until this replica leads, following GET /leader/watch (Server-
    Sent Events), then confirms with a fresh GET /leader, whose send time
    the deadline counts from. Raises SidecarError if the stream breaks or
    stays silent (no event, no keep-alive) for idle_timeout seconds."""
    events = _events(url, "/leader/watch", idle_timeout)
    try:
        for name, data in events:
            if name == "" and _decode(data.encode())["leader"]:
                term = current_term(url)
                if term is not None:
                    return term
    finally:
        events.close()
    raise SidecarError("the sidecar ended the stream")  # not reached: _events raises


# Shard mode (--shards N): GET /shards, GET /shards/watch, POST
# /shards/{i}/drained. The JSON is fence.ShardsJSON, fence.ShardJSON and
# fence.ShardEventJSON in pkg/fence; see docs/shards.md.

HELD, DRAINING = "held", "draining"  # the states of a shard held here
SHARD_EVENTS = ("acquired", "draining", "undrained", "renewed", "released", "lost")


class StaleTokenError(Exception):
    """A write presented a shard's term older than the last one accepted."""


class ShardTerm(NamedTuple):
    """One term of one shard held here: attach shard, token and holder to
    every write of the shard's data (ShardGuard, or the check where the
    data lives, refuses an older term). Within a group, a token counts only
    its shard's terms."""

    group: str
    shard: int
    token: int
    holder: str  # the sidecar's identity
    state: str  # "held"; "draining": stop, then drained(shard); in an event that ends it, "released" or "lost"
    start: str  # the shard's range of FNV-1a 64 hashes of keys, [start, end)
    end: str
    valid_until: float  # time.time() at which the claim lapses unless renewed
    shards: int = 0  # the group's number of shards, part of the resource name

    def valid(self) -> bool:
        """Whether to work on the shard: held, not draining, not lapsed."""
        return self.state == HELD and time.time() < self.valid_until

    @property
    def resource(self) -> str:
        """The name the guards fence the shard's data under (fence.ShardResource)."""
        return "%s/%d/shard-%d" % (self.group, self.shards, self.shard)


class Shards(NamedTuple):
    """GET /shards, and each state of GET /shards/watch."""

    group: str
    identity: str
    shards: int  # the group's shards, numbered from 0
    members: list  # the live members this replica sees
    leaving: bool  # the sidecar began a graceful stop
    held: list  # a ShardTerm per shard held here, by shard number
    shard_selector: str  # the held ranges for a sharded watch; "" when none is held


class ShardEvent(NamedTuple):
    """A typed event of GET /shards/watch: event is one of SHARD_EVENTS
    (or one added later: ignore it), term the shard's term it is about."""

    event: str
    term: ShardTerm


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def _epoch(text) -> float:
    """An RFC 3339 time as seconds since the epoch (time.time())."""
    m = _RFC3339.match(text) if isinstance(text, str) else None
    if not m:
        raise SidecarError("validUntil %r is not an RFC 3339 time" % (text,))
    fields = [int(g) for g in m.groups()[:6]]
    t = calendar.timegm(tuple(fields) + (0, 0, 0)) + float(m.group(7) or 0)
    zone = m.group(8)
    if zone not in ("Z", "z"):
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        t -= offset if zone[0] == "+" else -offset
    return t


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shard_term(h, group: str, identity: str, n: int, states) -> ShardTerm:
    """The ShardTerm of a held shard's JSON (or an event's), checked."""
    if not isinstance(h, dict):
        raise SidecarError("a held shard that is not an object: %r" % (h,))
    shard, token, state, rng = h.get("shard"), h.get("token"), h.get("state"), h.get("range")
    if not _is_int(shard) or not 0 <= shard < n:
        raise SidecarError("shard %r of %d" % (shard, n))
    if not _is_int(token) or token < 1:
        raise SidecarError("shard %d with token %r, want >= 1" % (shard, token))
    if state not in states:
        raise SidecarError("shard %d in state %r" % (shard, state))
    if not isinstance(rng, dict) or not isinstance(rng.get("start"), str) or not isinstance(rng.get("end"), str):
        raise SidecarError("shard %d without a range" % shard)
    return ShardTerm(group, shard, token, identity, state, rng["start"], rng["end"], _epoch(h.get("validUntil")), n)


def shards_of(answer) -> Shards:
    """The Shards of a GET /shards answer (or a state of /shards/watch),
    checked as pkg/fence checks it; unknown fields are ignored."""
    if not isinstance(answer, dict):
        raise SidecarError("not a shards answer: %r" % (answer,))
    group, identity, n = answer.get("group"), answer.get("identity"), answer.get("shards")
    held, selector = answer.get("held"), answer.get("shardSelector")
    if not isinstance(group, str) or not group or not isinstance(identity, str) or not identity:
        raise SidecarError("a shards answer without a group or an identity: %r" % (answer,))
    if not _is_int(n) or n < 1 or not isinstance(held, list) or not isinstance(selector, str):
        raise SidecarError("a shards answer needs shards >= 1, held and shardSelector: %r" % (answer,))
    terms = sorted((_shard_term(h, group, identity, n, (HELD, DRAINING)) for h in held), key=lambda t: t.shard)
    if len({t.shard for t in terms}) != len(terms):
        raise SidecarError("a shard held twice: %r" % (held,))
    if bool(terms) != bool(selector):
        raise SidecarError("shardSelector %r with %d shards held" % (selector, len(terms)))
    members = answer.get("members") if isinstance(answer.get("members"), list) else []
    return Shards(group, identity, n, members, answer.get("leaving") is True, terms, selector)


def _json(data, what: str):
    try:
        return json.loads(data)
    except ValueError as e:
        raise SidecarError("%s is not JSON: %r" % (what, data[:200])) from e


def shards(url: Optional[str] = None, timeout: float = 2.0) -> Shards:
    """GET /shards: the shards held here, each with its term, and the
    shardSelector. Raises SidecarError when the sidecar does not answer
    usably (not in shard mode, say): take that as holding nothing."""
    return shards_of(_json(_get(url, "/shards", timeout, MAX_SHARDS_ANSWER), "the shards answer"))


def watch_shards(url: Optional[str] = None, idle_timeout: float = 45.0):
    """Follows GET /shards/watch: yields a ShardEvent for each typed event,
    in order (a new stream begins with acquired for every shard held), and
    the Shards of each state (a change of members, shards, tokens or states).
    Renewals come as renewed events only, with the later valid_until.
    Raises SidecarError when the stream cannot be opened, breaks or ends:
    then nothing held is known any more; stop working on every shard."""
    first = shards(url)  # the group and identity, which typed events do not repeat
    group, identity, n = first.group, first.identity, first.shards
    events = _events(url, "/shards/watch", idle_timeout)
    try:
        for name, data in events:
            body = _json(data, "an event")
            if name == "":
                st = shards_of(body)
                if (st.group, st.identity, st.shards) != (group, identity, n):
                    raise SidecarError("the stream is from another sidecar: %s, not %s" % (st.identity, identity))
                yield st
            elif name in SHARD_EVENTS:
                states = (name,) if name in ("released", "lost") else (HELD, DRAINING)
                yield ShardEvent(name, _shard_term(body, group, identity, n, states))
            # else an event added later: ignored
    finally:
        events.close()


def drained(shard: int, url: Optional[str] = None, timeout: float = 2.0, token: Optional[int] = None) -> bool:
    """POST /shards/{shard}/drained?token=N: this application has stopped
    working on the draining shard in the term of token N (the ShardTerm's
    token; without it, whichever term drains), and the sidecar releases it at
    once. Returns False when the shard does not drain here, or drains in
    another term (409); raises SidecarError for any other answer."""
    if not _is_int(shard) or shard < 0:
        raise SidecarError("shard %r is not a shard number" % (shard,))
    if token is not None and (not _is_int(token) or token < 1):
        raise SidecarError("token %r is not a token" % (token,))
    where = "%s/shards/%d/drained" % (_base(url), shard)
    if token is not None:
        where += "?token=%d" % token
    req = urllib.request.Request(where, data=b"", method="POST")
    try:
        with _opener.open(req, timeout=timeout) as resp:
            resp.read(MAX_ANSWER)
        return True
    except urllib.error.HTTPError as e:
        if e.code == 409:
            return False
        raise SidecarError("POST %s: %s %s" % (where, e.code, e.read(200))) from e
    except (OSError, urllib.error.URLError) as e:
        raise SidecarError("POST %s: %s" % (where, e)) from e


class ShardGuard:
    """Fences data this process owns, per shard, as pkg/fence's
    MemoryGuard.DoShard: it remembers, for each shard of each group and count, the last
    term whose write succeeded, and runs a write only if its term follows
    that one: a higher token, or the same token from the same holder. A
    lower token, or an equal one from another holder, is refused with
    StaleTokenError; other shards' tokens do not matter. The check and the
    write run under one lock. It fences nothing across processes: for data
    elsewhere, put the same check where the data lives (docs/fencing.md)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._accepted = {}  # resource -> (token, holder)

    def do(self, term: ShardTerm, write):
        """Runs write() if term follows the last term accepted for its
        shard, records term as accepted if write returns, and returns what
        it returns; else raises StaleTokenError without running it."""
        if not term.group or not _is_int(term.shards) or not _is_int(term.shard) or not 0 <= term.shard < term.shards:
            raise ValueError("a shard term needs a group and a shard of its count: %r" % (term,))
        if not _is_int(term.token) or term.token < 0 or not term.holder:
            raise ValueError("a shard term needs a token >= 0 and a holder: %r" % (term,))
        key = term.resource
        with self._lock:
            last = self._accepted.get(key)
            if last is not None and not (term.token > last[0] or (term.token == last[0] and term.holder == last[1])):
                raise StaleTokenError("%s accepted token %d of %s, this write has token %d of %s"
                                      % (term.resource, last[0], last[1], term.token, term.holder))
            result = write()
            self._accepted[key] = (term.token, term.holder)
            return result

    def accepted(self, group: str, shards: int, shard: int):
        """The last (token, holder) accepted for shard of a group of shards, or None."""
        with self._lock:
            return self._accepted.get("%s/%d/shard-%d" % (group, shards, shard))


USAGE = "usage: leader.py [--wait | --shards | --shard-selector | --watch-shards | --drained SHARD [TOKEN]]"


def main(argv) -> int:
    args = argv[1:]
    try:
        if args in ([], ["--wait"]):
            term = wait_for_term() if args else current_term()
            if term is None:
                return 1
            print(term.token, term.identity, term.valid_for_ms())
            return 0
        if args == ["--shards"]:
            st = shards()
            for t in st.held:
                print(t.shard, t.token, t.state, t.holder)
            return 0 if st.held else 1
        if args == ["--shard-selector"]:
            st = shards()
            if not st.shard_selector:
                return 1
            print(st.shard_selector)
            return 0
        if args == ["--watch-shards"]:
            for ev in watch_shards():
                if isinstance(ev, ShardEvent):
                    print(ev.event, ev.term.shard, ev.term.token, ev.term.holder, flush=True)
            return 2  # not reached: watch_shards raises when the stream ends
        if len(args) in (2, 3) and args[0] == "--drained" and all(re.fullmatch("[0-9]+", a) for a in args[1:]):
            if drained(int(args[1]), token=int(args[2]) if len(args) == 3 else None):
                return 0
            print("leader.py: shard %s does not drain here" % args[1], file=sys.stderr)
            return 1
    except SidecarError as e:
        print("leader.py: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
