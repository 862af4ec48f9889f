#!/usr/bin/env bash
# Makes sure the machine has what the test suite needs beyond Go: the
# PostgreSQL server binaries (the tests start their own throwaway server),
# the envtest binaries (built by hack/envtest-binaries.sh) and Helm 3 and 4
# (hack/helm.sh). Installs
# PostgreSQL from Debian's packages when missing and running as root;
# otherwise says what to install.
set -euo pipefail

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "test-deps: installing PostgreSQL's server binaries (apt-get install postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  else
    echo "test-deps: PostgreSQL's server binaries are missing: install them (Debian: apt-get install postgresql)" >&2
    exit 1
  fi
fi

"$(dirname "${BASH_SOURCE[0]}")/envtest-binaries.sh" >/dev/null

# Helm 3 and Helm 4 for the chart tests, built once into the cache (Helm 4
# takes many minutes cold): before go test, so its timeout never covers it.
"$(dirname "${BASH_SOURCE[0]}")/helm.sh" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/helm.sh" 4 >/dev/null
