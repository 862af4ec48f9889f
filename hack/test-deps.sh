#!/usr/bin/env bash
# Makes sure the machine has what the test suite needs beyond Go: curl, the
# servers the fencing guards are tested on (PostgreSQL, MariaDB, Redis: the
# tests start their own throwaway servers; etcd comes with the envtest
# binaries), promtool and the Prometheus server (the alert tests,
# e2e/alerts), the envtest binaries (built by hack/envtest-binaries.sh)
# and Helm 3 and 4 (hack/helm.sh). Installs the missing Debian packages
# in one apt-get run when root; otherwise says what to install.
#
#   hack/test-deps.sh            all of it
#   hack/test-deps.sh packages   the Debian packages only (.ci/run builds
#                                the rest beside other builds)
set -euo pipefail
case ${1:-all} in
all | packages) ;;
*) echo "usage: hack/test-deps.sh [packages]" >&2; exit 2 ;;
esac

# The Debian packages of what is missing, with what each is for.
missing=() why=()
need() { missing+=("$2"); why+=("$1"); }

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
  need "PostgreSQL's server binaries" postgresql
fi
# mariadb-server-core: the server binaries alone (mariadb-server adds a
# system service the tests do not use).
if ! [[ -x /usr/sbin/mariadbd || -x /usr/sbin/mysqld ]] && ! command -v mariadbd >/dev/null; then
  need "MariaDB's server" mariadb-server-core
fi
if ! command -v redis-server >/dev/null; then
  need redis-server redis-server
fi
# Debian's prometheus package ships promtool and the server (the live
# alert test starts one).
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  need "promtool and prometheus" prometheus
fi

# pgbouncer: a pooler in transaction mode in front of the PostgreSQL
# tests' server (e2e/process), where LISTEN cannot work.
if ! [[ -x /usr/sbin/pgbouncer ]] && ! command -v pgbouncer >/dev/null; then
  need PgBouncer pgbouncer
fi

# curl: the README's and docs/handoff.md's commands, run as written
# (e2e/process).
if ! command -v curl >/dev/null; then
  need curl curl
fi

if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "test-deps: installing ${why[*]} (apt-get install ${missing[*]})" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "test-deps: missing: ${why[*]}: install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

[[ ${1:-all} == packages ]] && exit 0

# kube-apiserver and etcd, and Helm 3 and Helm 4 for the chart tests,
# built once into the cache (minutes each when cold): before go test, so
# its timeout never covers them. The two builds run at once: one go build
# leaves a core idle during its links and largest packages.
hack=$(dirname "${BASH_SOURCE[0]}")
"$hack/envtest-binaries.sh" >/dev/null &
envtest=$!
"$hack/helm.sh" >/dev/null && "$hack/helm.sh" 4 >/dev/null
wait "$envtest"
