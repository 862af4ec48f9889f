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
# In shard mode (the sidecar's --shards N), each shard has its own term:
#
#   leader.sh --shards | while read -r shard token state identity; do
#     ...state "held": work on the shard, attaching $token and $identity to
#     every write of its data; "draining": stop, then leader.sh --drained $shard
#   done
#
#   leader.sh --shards          prints "<shard> <token> <state> <identity>" for
#                               each shard held here (state "held" or
#                               "draining"), exits 0 while it holds one, 1
#                               while it holds none, 2 as above
#   leader.sh --shard-selector  prints the shardSelector of the shards held
#                               here, exits 0, 1 or 2 alike
#   leader.sh --drained I       acknowledges the drain of shard I (POST
#                               /shards/I/drained: the sidecar releases it),
#                               exits 0, 1 when shard I does not drain here,
#                               2 as above
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

usage() {
  echo "usage: leader.sh [--shards | --shard-selector | --drained SHARD]" >&2
  exit 2
}

# drained acknowledges the drain of shard $1.
drained() {
  case $1 in '' | *[!0-9]*) usage ;; esac
  code=$(curl -sS --max-time 2 --noproxy '*' -o /dev/null -w '%{http_code}' -X POST "$url/shards/$1/drained") ||
    fail "no answer from $url/shards/$1/drained"
  case $code in
    200) exit 0 ;;
    409) echo "leader.sh: shard $1 does not drain here" >&2 && exit 1 ;;
    *) fail "POST $url/shards/$1/drained: status $code" ;;
  esac
}

# shards prints the shards held here (--shards) or the shardSelector
# (--shard-selector), from GET /shards.
shards() {
  body=$(curl -fsS --max-time 2 --noproxy '*' "$url/shards") || fail "no usable answer from $url/shards"
  if command -v "$jq" >/dev/null 2>&1; then
    held=$(printf '%s' "$body" | "$jq" -er '
      if (.identity | type) != "string" or (.held | type) != "array" or (.shardSelector | type) != "string"
      then error("not a shards answer")
      else .identity as $id | [.held[] | "\(.shard) \(.token) \(.state) \($id)"] | join("\n") end') &&
      selector=$(printf '%s' "$body" | "$jq" -er .shardSelector) || fail "not the sidecar's shards JSON: $body"
  else
    # The answer is one line of JSON; each held shard is a flat object but
    # for its range, and no string in the answer holds '"', "]" or "}".
    case $body in *'"held":['*) ;; *) fail "not the sidecar's shards JSON: $body" ;; esac
    case $body in *'"shardSelector":"'*) ;; *) fail "not the sidecar's shards JSON: $body" ;; esac
    value() { printf '%s' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"; }
    identity=$(value identity "$body")
    # One held shard's object a line.
    held=$(printf '%s\n' "$body" | sed -n 's/.*"held":\[\([^]]*\)\].*/\1/p' | sed 's/},{/}\
{/g' | while IFS= read -r shard; do
      [ -z "$shard" ] || echo "$(value shard "$shard") $(value token "$shard") $(value state "$shard") $identity"
    done)
    selector=$(printf '%s\n' "$body" | sed -n 's/.*"shardSelector":"\([^"]*\)".*/\1/p')
  fi
  # Each held shard has a number, a token >= 1, the state held or draining,
  # and the identity; the selector is empty when nothing is held.
  [ -n "$held" ] || [ -z "$selector" ] || fail "a shardSelector with no shard held: $body"
  [ -n "$held" ] || exit 1
  [ -n "$selector" ] || fail "no shardSelector for the shards held: $body"
  lines=$(printf '%s\n' "$held" | while read -r shard token state id rest; do
    case $shard in '' | *[!0-9]*) fail "a held shard numbered '$shard': $body" ;; esac
    case $token in '' | 0* | *[!0-9]*) fail "shard $shard with token '$token': $body" ;; esac
    case $state in held | draining) ;; *) fail "shard $shard in state '$state': $body" ;; esac
    [ -n "$id" ] && [ -z "$rest" ] || fail "shard $shard without the identity: $body"
    printf '%s %s %s %s\n' "$shard" "$token" "$state" "$id"
  done) || exit 2
  if [ "$1" = --shard-selector ]; then
    printf '%s\n' "$selector"
  else
    printf '%s\n' "$lines"
  fi
  exit 0
}

case $# in
  0) ;;
  1) case $1 in --shards | --shard-selector) shards "$1" ;; *) usage ;; esac ;;
  2) [ "$1" = --drained ] || usage
    drained "$2" ;;
  *) usage ;;
esac

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
