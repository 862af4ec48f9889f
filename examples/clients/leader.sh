#!/bin/sh
# leader.sh: does this replica lead? Asks the leader-sidecar next door.
#
#   if term=$(leader.sh); then
#     set -- $term    # $1 fencing token, $2 identity (the term's holder),
#                     # $3 milliseconds the claim is still valid for
#     ...attach $1 and $2 to every write, checked by the resource...
#   fi
#
# Prints "<token> <identity> <validForMs>" and exits 0 while this replica
# leads; prints nothing and exits 1 while it does not; exits 2 (with a
# message on stderr) when the sidecar does not answer usably, which must be
# taken as "not leader" too.
#
# LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).
# Needs curl. Parses with jq when it is on PATH (or at $JQ), else with sed,
# which relies on the identity having no ",", "}" or '"' (true of Pod names
# and host names, which identities start with).
set -u

url=${LEADER_SIDECAR_URL:-http://127.0.0.1:4040}
jq=${JQ:-jq}

fail() {
  echo "leader.sh: $*" >&2
  exit 2
}

body=$(curl -fsS --max-time 2 --noproxy '*' "$url/leader") || fail "no usable answer from $url/leader"

if command -v "$jq" >/dev/null 2>&1; then
  line=$(printf '%s' "$body" | "$jq" -er '
    if .leader == true then "\(.token) \(.identity) \(.validForMs)"
    elif .leader == false then ""
    else error("no leader field") end') || fail "not the sidecar's JSON: $body"
else
  # The answer is one line of flat JSON: take each field's value as is.
  field() { printf '%s' "$body" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
  case $(field leader) in
    true) line="$(field token) $(field identity | sed 's/^"\(.*\)"$/\1/') $(field validForMs)" ;;
    false) line="" ;;
    *) fail "not the sidecar's JSON: $body" ;;
  esac
fi

[ -n "$line" ] || exit 1
# A leader's answer has a token >= 1, an identity and validForMs >= 0.
set -- $line
[ $# -eq 3 ] || fail "a leader answer without token, identity or validForMs: $body"
case $1 in '' | 0* | *[!0-9]*) fail "a leader answer with token $1: $body" ;; esac
case $3 in '' | *[!0-9]*) fail "a leader answer with validForMs $3: $body" ;; esac
printf '%s %s %s\n' "$1" "$2" "$3"
