#!/usr/bin/env bash
# Installs a pinned helm from the Go module proxy (no other download), into a
# cache directory outside the repository, and prints the path of the helm
# binary as the last line of stdout (progress goes to stderr):
#
#   HELM=$(hack/helm.sh | tail -1)
#   "$HELM" lint --strict charts/leader-sidecar-lib
#
# The build is skipped when the binary is present and its stamp file matches
# the pinned version and build flags. Set LEADER_SIDECAR_HELM_DIR to choose
# the directory, HELM_VERSION to pin another release. The build runs niced:
# it shares the machine with tests.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
# The Kubernetes version helm assumes without a cluster (helm template,
# Capabilities.KubeVersion, lint): the release's Makefile stamps the version
# of its k8s.io modules, which go install does not; v3.22 builds on 0.37.
K8S_MAJOR=1 K8S_MINOR=37
dir=${LEADER_SIDECAR_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/bin}
log() { echo "helm.sh: $*" >&2; }

ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=${K8S_MAJOR} -X $pkg.k8sVersionMinor=${K8S_MINOR}"
done
stamp="helm.sh/helm/v3 ${HELM_VERSION}
ldflags ${ldflags}"

mkdir -p "$dir"
exec 9>"$dir/.helm.lock"
flock 9 # one build at a time per directory

if [[ -x $dir/helm && "$(cat "$dir/helm.stamp" 2>/dev/null)" == "$stamp" ]] &&
  [[ "$("$dir/helm" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]]; then
  log "up to date: helm $HELM_VERSION"
else
  log "building helm $HELM_VERSION into $dir (takes minutes when cold)"
  rm -f "$dir/helm.stamp"
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (
    cd "$tmp" # outside any module: go install resolves helm's own go.mod
    export GOWORK=off GOFLAGS='' CGO_ENABLED=0 GOBIN="$tmp"
    nice -n 10 go install -trimpath -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  )
  got=$("$tmp/helm" version --template '{{.Version}}')
  [[ $got == "$HELM_VERSION" ]] || { log "built helm reports $got, want $HELM_VERSION"; exit 1; }
  mv -f "$tmp/helm" "$dir/helm"
  printf '%s\n' "$stamp" >"$dir/helm.stamp"
  log "built in ${SECONDS}s"
fi

echo "$dir/helm"
