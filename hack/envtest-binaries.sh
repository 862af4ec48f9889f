#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries used by controller-runtime's
# envtest from the versions pinned in hack/tools/envtest/go.mod, into a cache
# directory outside the repository, and prints that directory as the last line
# of stdout (progress goes to stderr):
#
#   export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)
#
# The build is skipped when the directory's stamp file matches the pinned
# versions and the go.mod/go.sum hash. Set LEADER_SIDECAR_ENVTEST_DIR to
# choose the directory.
set -euo pipefail

moddir=$(cd "$(dirname "${BASH_SOURCE[0]}")/tools/envtest" && pwd)
log() { echo "envtest-binaries: $*" >&2; }

# Version of a module required in the tools go.mod.
pinned() { awk -v m="$1" '{ for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "$moddir/go.mod"; }
K8S_VERSION=$(pinned k8s.io/kubernetes)
ETCD_VERSION=$(pinned go.etcd.io/etcd/server/v3)
[[ -n $K8S_VERSION && -n $ETCD_VERSION ]] || { log "cannot read pinned versions from $moddir/go.mod"; exit 1; }

dir=${LEADER_SIDECAR_ENVTEST_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/envtest/${K8S_VERSION}-${ETCD_VERSION}}

# Stamp the Kubernetes version into the binary as the release build does.
IFS=. read -r k8s_major k8s_minor _ <<<"${K8S_VERSION#v}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=${k8s_major}"
  k8s_ldflags+=" -X $pkg.gitMinor=${k8s_minor} -X $pkg.gitTreeState=clean"
done

stamp="k8s.io/kubernetes ${K8S_VERSION}
go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
go.mod+go.sum sha256 $(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -d' ' -f1)
kube-apiserver ldflags ${k8s_ldflags}"

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time per directory

if [[ -x $dir/kube-apiserver && -x $dir/etcd && "$(cat "$dir/stamp" 2>/dev/null)" == "$stamp" ]]; then
  log "up to date: kube-apiserver ${K8S_VERSION}, etcd ${ETCD_VERSION}"
else
  log "building kube-apiserver ${K8S_VERSION} and etcd ${ETCD_VERSION} into $dir (takes minutes when cold)"
  rm -f "$dir/stamp"
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (
    cd "$moddir"
    export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0
    go build -trimpath -ldflags="$k8s_ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
    go build -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
  )
  mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$dir/"
  printf '%s\n' "$stamp" >"$dir/stamp"
  log "built in ${SECONDS}s"
fi

echo "$dir"
