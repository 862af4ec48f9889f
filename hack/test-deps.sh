#!/usr/bin/env bash
# Makes sure the machine has what the test suite needs beyond Go: the
# PostgreSQL server binaries (the tests start their own throwaway server),
# promtool and the Prometheus server (the alert tests, e2e/alerts), the
# envtest binaries (built by hack/envtest-binaries.sh) and Helm 3 and 4
# (hack/helm.sh). Installs
# PostgreSQL and Prometheus from Debian's packages when missing and running
# as root; otherwise says what to install.
set -euo pipefail

# install_package <what is missing> <Debian package>: apt-get install, as
# root; else say what to install and fail.
install_package() {
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "test-deps: installing $1 (apt-get install $2)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "$2" >/dev/null
  else
    echo "test-deps: $1 is missing: install it (Debian: apt-get install $2)" >&2
    exit 1
  fi
}

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
  install_package "PostgreSQL's server binaries" postgresql
fi

# Debian's prometheus package ships promtool and the server (the live
# alert test starts one).
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  install_package "promtool and prometheus" prometheus
fi

"$(dirname "${BASH_SOURCE[0]}")/envtest-binaries.sh" >/dev/null

# Helm 3 and Helm 4 for the chart tests, built once into the cache (Helm 4
# takes many minutes cold): before go test, so its timeout never covers it.
"$(dirname "${BASH_SOURCE[0]}")/helm.sh" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/helm.sh" 4 >/dev/null
