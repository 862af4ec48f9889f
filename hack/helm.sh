#!/usr/bin/env bash
# Builds a pinned helm from the Go module proxy (no other download), into a
# cache directory outside the repository, and prints the path of the helm
# binary as the last line of stdout (progress goes to stderr):
#
#   HELM=$(hack/helm.sh | tail -1)      # Helm 3, as helm
#   HELM4=$(hack/helm.sh 4 | tail -1)   # Helm 4, as helm4, next to it
#   "$HELM" lint --strict charts/leader-sidecar-lib
#
# Both are pinned in one tools module, hack/tools/helm, so that their
# dependencies have the same versions and the second build reuses the
# packages the first compiled. The build is skipped when the binary is
# present and its stamp file matches the pinned version and build flags.
# Set LEADER_SIDECAR_HELM_DIR to choose the directory, HELM_VERSION (Helm 3)
# or HELM4_VERSION (Helm 4) to install another release with its own
# dependencies (go install). Builds run niced and one at a time: they share
# the machine with tests, and a cold one takes minutes.
set -euo pipefail

major=${1:-3}
dir=${LEADER_SIDECAR_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/bin}
moddir=$(cd "$(dirname "${BASH_SOURCE[0]}")/tools/helm" && pwd)
log() { echo "helm.sh: $*" >&2; }

# Version of a module required in the tools go.mod.
pinned() { awk -v m="$1" '{ for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "$moddir/go.mod"; }

case $major in
3)
  module=helm.sh/helm/v3
  version=${HELM_VERSION:-$(pinned $module)}
  bin=helm
  # The Kubernetes version helm 3 assumes without a cluster (helm template,
  # Capabilities.KubeVersion, lint): the release's Makefile stamps the
  # version of its k8s.io modules, which a go build does not; v3.22 builds
  # on 0.37.
  ldflags="-s -w -X $module/internal/version.version=${version}"
  for pkg in $module/pkg/chartutil $module/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=37"
  done
  ;;
4)
  module=helm.sh/helm/v4
  version=${HELM4_VERSION:-$(pinned $module)}
  bin=helm4
  # Helm 4 reads the Kubernetes version from the module versions in its own
  # build info, which go install keeps: only the version needs stamping.
  ldflags="-s -w -X $module/internal/version.version=${version}"
  ;;
*)
  log "usage: hack/helm.sh [3|4] (the major version of helm; default 3)"
  exit 2
  ;;
esac
[[ -n $version ]] || { log "cannot read the pinned $module from $moddir/go.mod"; exit 1; }
stamp="$module ${version}
ldflags ${ldflags}"
from_tools_module=false
if [[ $version == "$(pinned $module)" ]]; then
  from_tools_module=true
  stamp+="
go.mod+go.sum sha256 $(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -d' ' -f1)"
fi

mkdir -p "$dir"
# One lock per binary, so that a build of one does not hold up the other's
# up-to-date check; .build.lock keeps to one build at a time.
exec 9>"$dir/.$bin.lock"
flock 9

up_to_date() {
  [[ -x $dir/$bin && "$(cat "$dir/$bin.stamp" 2>/dev/null)" == "$stamp" ]] &&
    [[ "$("$dir/$bin" version --template '{{.Version}}' 2>/dev/null)" == "$version" ]]
}

if up_to_date; then
  log "up to date: $bin $version"
else
  exec 8>"$dir/.build.lock"
  flock 8
  log "building $bin $version into $dir (takes minutes when cold)"
  rm -f "$dir/$bin.stamp"
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if $from_tools_module; then
    (
      cd "$moddir"
      export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0
      nice -n 10 go build -trimpath -ldflags="$ldflags" -o "$tmp/helm" "$module/cmd/helm"
    )
  else
    (
      cd "$tmp" # outside any module: go install resolves helm's own go.mod
      export GOWORK=off GOFLAGS='' CGO_ENABLED=0 GOBIN="$tmp"
      nice -n 10 go install -trimpath -ldflags="$ldflags" "$module/cmd/helm@${version}"
    )
  fi
  got=$("$tmp/helm" version --template '{{.Version}}')
  [[ $got == "$version" ]] || { log "built $bin reports $got, want $version"; exit 1; }
  mv -f "$tmp/helm" "$dir/$bin"
  printf '%s\n' "$stamp" >"$dir/$bin.stamp"
  log "built in ${SECONDS}s"
fi

echo "$dir/$bin"
