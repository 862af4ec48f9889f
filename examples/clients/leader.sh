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
#   leader.sh --wait            blocks until this replica leads (following
#                               GET /leader/watch), then prints and exits as
#                               above; exits 2 when the stream ends, breaks or
#                               stays silent for 45s
#
# In shard mode (the sidecar's --shards N), each shard has its own term:
#
#   leader.sh --watch-shards | while read -r event shard token identity; do
#     case $event in
#       acquired) ...work on the shard, attaching $token and $identity to
#                 every write of its data... ;;
#       draining) ...stop working on it, then: leader.sh --drained $shard ;;
#       released | lost) ...stop working on it at once... ;;
#     esac
#   done
#   ...the stream ended: stop working on every shard...
#
#   leader.sh --shards          prints "<shard> <token> <state> <identity>" for
#                               each shard held here (state "held" or
#                               "draining"), exits 0 while it holds one, 1
#                               while it holds none, 2 as above
#   leader.sh --shard-selector  prints the shardSelector of the shards held
#                               here, exits 0, 1 or 2 alike
#   leader.sh --watch-shards    follows GET /shards/watch and prints
#                               "<event> <shard> <token> <identity>" for each
#                               acquired, draining, undrained, renewed,
#                               released and lost; exits 2 when the stream
#                               ends, breaks, stays silent for 45s or sends
#                               what the sidecar does not (what is held is
#                               then unknown)
#   leader.sh --drained I [T]   acknowledges the drain of shard I (POST
#                               /shards/I/drained?token=T: the sidecar
#                               releases it), in the term of token T if
#                               given, exits 0, 1 when shard I does not
#                               drain here (or in another term), 2 as above
#
# LEADER_SIDECAR_URL is the sidecar's app API (default http://127.0.0.1:4040).
# Needs curl. Parses with jq when it is on PATH (or at $JQ), else with sed,
# which relies on the identity having no ",", "}" or '"' (true of Pod names
# and host names, which identities start with).
set -u -f

url=${LEADER_SIDECAR_URL:-http://127.0.0.1:4040}
jq=${JQ:-jq}
command -v "$jq" >/dev/null 2>&1 || jq=

fail() {
  echo "leader.sh: $*" >&2
  exit 2
}

usage() {
  echo "usage: leader.sh [--wait | --shards | --shard-selector | --watch-shards | --drained SHARD [TOKEN]]" >&2
  exit 2
}

# value prints field $1 of the JSON $2 by sed: its last "$1": and the value
# after it up to a '"', "," or "}".
value() { printf '%s' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"; }

# drained acknowledges the drain of shard $1, in the term of token $2 if
# given.
drained() {
  case $1 in '' | *[!0-9]*) usage ;; esac
  where="$url/shards/$1/drained"
  if [ $# -gt 1 ]; then
    case $2 in '' | *[!0-9]*) usage ;; esac
    where="$where?token=$2"
  fi
  code=$(curl -sS --max-time 2 --noproxy '*' -o /dev/null -w '%{http_code}' -X POST "$where") ||
    fail "no answer from $where"
  case $code in
    200) exit 0 ;;
    409) echo "leader.sh: shard $1 does not drain here${2:+ in the term of token $2}" >&2 && exit 1 ;;
    *) fail "POST $where: status $code" ;;
  esac
}

# check_term fails unless shard $1 of the group's $count shards has a
# token $2 >= 1 and a state $3 among $4, naming $5 (what was answered).
check_term() {
  case $1 in '' | *[!0-9]*) fail "a shard numbered '$1': $5" ;; esac
  [ "$1" -lt "$count" ] 2>/dev/null || fail "shard $1 of $count: $5"
  case $2 in '' | 0* | *[!0-9]*) fail "shard $1 with token '$2': $5" ;; esac
  case " $4 " in *" $3 "*) ;; *) fail "shard $1 in state '$3': $5" ;; esac
}

# read_shards reads GET /shards into identity, count (the group's shards),
# held (a line "<shard> <token> <state> <identity>" per shard held here)
# and selector; it returns 1 when no shard is held here.
read_shards() {
  body=$(curl -fsS --max-time 2 --noproxy '*' "$url/shards") || fail "no usable answer from $url/shards"
  if [ -n "$jq" ]; then
    meta=$(printf '%s' "$body" | "$jq" -er '
      if (.identity | type) != "string" or (.shards | type) != "number" or (.held | type) != "array" or (.shardSelector | type) != "string"
      then error("not a shards answer") else "\(.shards) \(.identity)" end') &&
      held=$(printf '%s' "$body" | "$jq" -r '.identity as $id | [.held[] | "\(.shard) \(.token) \(.state) \($id)"] | join("\n")') &&
      selector=$(printf '%s' "$body" | "$jq" -r .shardSelector) || fail "not the sidecar's shards JSON: $body"
    count=${meta%% *} identity=${meta#* }
  else
    # The answer is one line of JSON; each held shard is a flat object but
    # for its range, and no string in the answer holds '"', "]" or "}".
    case $body in *'"held":['*) ;; *) fail "not the sidecar's shards JSON: $body" ;; esac
    case $body in *'"shardSelector":"'*) ;; *) fail "not the sidecar's shards JSON: $body" ;; esac
    identity=$(value identity "$body")
    count=$(value shards "$body")
    # One held shard's object a line.
    held=$(printf '%s\n' "$body" | sed -n 's/.*"held":\[\([^]]*\)\].*/\1/p' | sed 's/},{/}\
{/g' | while IFS= read -r shard; do
      [ -z "$shard" ] || echo "$(value shard "$shard") $(value token "$shard") $(value state "$shard") $identity"
    done)
    selector=$(printf '%s\n' "$body" | sed -n 's/.*"shardSelector":"\([^"]*\)".*/\1/p')
  fi
  case $identity in '' | *[[:space:]]*) fail "a shards answer without the identity: $body" ;; esac
  case $count in '' | 0* | *[!0-9]*) fail "a shards answer with shards '$count': $body" ;; esac
  # Each held shard has a number, a token >= 1, the state held or draining,
  # and the identity; the selector is empty when nothing is held.
  [ -n "$held" ] || [ -z "$selector" ] || fail "a shardSelector with no shard held: $body"
  [ -n "$held" ] || return 1
  [ -n "$selector" ] || fail "no shardSelector for the shards held: $body"
  held=$(printf '%s\n' "$held" | while read -r shard token state id rest; do
    check_term "$shard" "$token" "$state" "held draining" "$body"
    [ -n "$id" ] && [ -z "$rest" ] || fail "shard $shard without the identity: $body"
    printf '%s %s %s %s\n' "$shard" "$token" "$state" "$id"
  done) || exit 2
}

# on_event prints the named event $1 of /shards/watch, whose data is $2, as
# "<event> <shard> <token> <identity>", checked. A state (an event without a
# name) must be this sidecar's; an event added later is skipped.
on_event() {
  case $1 in
    '') if [ -n "$jq" ]; then
        id=$(printf '%s' "$2" | "$jq" -r '.identity // empty' 2>/dev/null)
      else
        id=$(value identity "$2")
      fi
      [ "$id" = "$identity" ] || fail "the stream is another sidecar's, not $identity's: $2"
      return ;;
    acquired | draining | undrained | renewed) states="held draining" ;;
    released | lost) states=$1 ;;
    *) return ;;
  esac
  if [ -n "$jq" ]; then
    fields=$(printf '%s' "$2" | "$jq" -r '"\(.shard) \(.token) \(.state)"' 2>/dev/null)
  else
    fields="$(value shard "$2") $(value token "$2") $(value state "$2")"
  fi
  read -r shard token state rest <<EOF
$fields
EOF
  check_term "$shard" "$token" "$state" "$states" "a $1 event: $2"
  [ -z "$rest" ] || fail "not a shard: a $1 event: $2"
  printf '%s %s %s %s\n' "$1" "$shard" "$token" "$identity"
}

# watch_shards follows GET /shards/watch (--watch-shards): a new stream
# begins with acquired for every shard held. It needs the identity and the
# group's size, which the events do not repeat, from GET /shards first.
watch_shards() {
  read_shards
  cr=$(printf '\r')
  # The pid of curl comes first, to stop it when this side ends.
  sh -c 'echo "$$" && exec curl -fsSN --connect-timeout 2 --speed-limit 1 --speed-time 45 --noproxy "*" "$0"' \
    "$url/shards/watch" | {
    read -r curl
    trap 'kill -s INT "$curl" 2>/dev/null' EXIT
    event= data=
    while IFS= read -r line; do
      line=${line%"$cr"}
      case $line in
        event:*) event=${line#event:}; event=${event# } ;;
        data:*) line=${line#data:}; data=${data:+$data
}${line# } ;;
        '') [ -z "$data" ] || on_event "$event" "$data"
          event= data= ;;
      esac # else a keep-alive comment or another field
    done
    fail "the stream from $url/shards/watch ended"
  }
  exit 2
}

# wait_for_term follows GET /leader/watch (--wait) until a state says this
# replica leads, then returns, for the term to be read afresh from GET
# /leader (whose answer the deadline counts from).
wait_for_term() {
  cr=$(printf '\r')
  # The pid of curl comes first, to stop it when this side ends.
  sh -c 'echo "$$" && exec curl -fsSN --connect-timeout 2 --speed-limit 1 --speed-time 45 --noproxy "*" "$0"' \
    "$url/leader/watch" | {
    read -r curl
    trap 'kill -s INT "$curl" 2>/dev/null' EXIT
    data=
    while IFS= read -r line; do
      line=${line%"$cr"}
      case $line in
        data:*) line=${line#data:}; data=${data:+$data
}${line# } ;;
        '') if [ -n "$data" ]; then
            if [ -n "$jq" ]; then
              leads=$(printf '%s' "$data" | "$jq" -r '.leader' 2>/dev/null)
            else
              leads=$(printf '%s' "$data" | sed -n 's/.*"leader":\([^,}]*\).*/\1/p')
            fi
            case $leads in
              true) exit 0 ;;
              false) ;;
              *) fail "not the sidecar's JSON on $url/leader/watch: $data" ;;
            esac
          fi
          data= ;;
      esac # else an event name, a keep-alive comment or another field
    done
    fail "the stream from $url/leader/watch ended"
  } || exit 2
}

case $# in
  0) ;;
  1) case $1 in
      --wait) wait_for_term ;;
      --shards) read_shards || exit 1
        printf '%s\n' "$held" && exit 0 ;;
      --shard-selector) read_shards || exit 1
        printf '%s\n' "$selector" && exit 0 ;;
      --watch-shards) watch_shards ;;
      *) usage ;;
    esac ;;
  2) [ "$1" = --drained ] || usage
    drained "$2" ;;
  3) [ "$1" = --drained ] || usage
    drained "$2" "$3" ;;
  *) usage ;;
esac

# The status on a line of its own after the body, so that an error answer's
# reason (a shard group's 409 says to ask GET /shards) can be shown.
answer=$(curl -sS --max-time 2 --noproxy '*' -w '\n%{http_code}' "$url/leader") || fail "no usable answer from $url/leader"
status=$(printf '%s\n' "$answer" | tail -n 1)
body=$(printf '%s\n' "$answer" | sed '$d')
case $status in
  2??) ;;
  *) reason=$(printf '%s' "$body" | sed -n 's/.*"error":"\([^"]*\)".*/\1/p')
    fail "GET $url/leader: HTTP $status${reason:+: $reason}" ;;
esac

if [ -n "$jq" ]; then
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

if [ -z "$line" ]; then
  # --wait: the claim lapsed between the event and the answer; wait again.
  [ "${1:-}" = --wait ] && exec sh "$0" --wait
  exit 1
fi
# A leader's answer has a token >= 1, an identity and validForMs >= 0.
set -- $line
[ $# -eq 3 ] || fail "a leader answer without token, identity or validForMs: $body"
case $1 in '' | 0* | *[!0-9]*) fail "a leader answer with token $1: $body" ;; esac
case $3 in '' | *[!0-9]*) fail "a leader answer with validForMs $3: $body" ;; esac
printf '%s %s %s\n' "$1" "$2" "$3"
