#!/usr/bin/env bash
# Builds the binaries of the one-node test cluster (hack/cluster.sh) into a
# cache directory outside the repository, and prints that directory as the
# last line of stdout (progress goes to stderr):
#
#   bin=$(hack/cluster-binaries.sh | tail -1)
#
# From the Go module proxy, at the versions pinned in the tools modules:
#   hack/tools/cluster  kubelet, kube-proxy, kube-scheduler,
#                       kube-controller-manager, kubectl (k8s.io/kubernetes,
#                       the same version as kube-apiserver in hack/tools/envtest)
#   hack/tools/node     containerd, containerd-shim-runc-v2 and ctr
#                       (containerd v2), and the CNI plugins bridge,
#                       host-local, loopback, portmap (in cni/)
# From Debian's packages (installed when missing and running as root): runc,
# iptables, conntrack. etcd and kube-apiserver are hack/envtest-binaries.sh's.
#
# Every binary has a stamp file naming its module, version and build flags;
# one whose stamp matches is not rebuilt, so an interrupted build resumes.
# Builds run one at a time and niced: the machine is shared with tests. Set
# LEADER_SIDECAR_CLUSTER_BIN_DIR to choose the directory.
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/tools" && pwd)
log() { echo "cluster-binaries: $*" >&2; }

# Version of a module required in a tools go.mod.
pinned() { awk -v m="$2" '{ for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "$tools/$1/go.mod"; }
K8S_VERSION=$(pinned cluster k8s.io/kubernetes)
CONTAINERD_VERSION=$(pinned node github.com/containerd/containerd/v2)
CNI_VERSION=$(pinned node github.com/containernetworking/plugins)
[[ -n $K8S_VERSION && -n $CONTAINERD_VERSION && -n $CNI_VERSION ]] || { log "cannot read pinned versions from $tools/*/go.mod"; exit 1; }
[[ $K8S_VERSION == "$(pinned envtest k8s.io/kubernetes)" ]] ||
  { log "k8s.io/kubernetes differs between hack/tools/cluster and hack/tools/envtest: run hack/gen-cluster-tools-mod.sh"; exit 1; }

dir=${LEADER_SIDECAR_CLUSTER_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/cluster/${K8S_VERSION}-containerd-${CONTAINERD_VERSION}-cni-${CNI_VERSION}}

# Stamp the Kubernetes version into the binaries as the release build does.
IFS=. read -r k8s_major k8s_minor _ <<<"${K8S_VERSION#v}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=${K8S_VERSION} -X $pkg.gitMajor=${k8s_major}"
  k8s_ldflags+=" -X $pkg.gitMinor=${k8s_minor} -X $pkg.gitTreeState=clean"
done
containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}"
containerd_ldflags+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
cni_ldflags="-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_VERSION}"

# build MODULE OUTPUT PACKAGE LDFLAGS: builds one binary unless its stamp matches.
build() {
  local mod=$1 out=$2 pkg=$3 ldflags=$4 stamp
  stamp="$pkg
go.mod+go.sum sha256 $(cat "$tools/$mod/go.mod" "$tools/$mod/go.sum" | sha256sum | cut -d' ' -f1)
CGO_ENABLED=0 -trimpath -ldflags=$ldflags"
  if [[ -x $dir/$out && "$(cat "$dir/$out.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  log "building $out ($pkg)"
  local start=$SECONDS
  rm -f "$dir/$out.stamp"
  mkdir -p "$(dirname "$dir/$out")"
  (
    cd "$tools/$mod"
    export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0
    nice -n 19 go build -trimpath -ldflags="$ldflags" -o "$tmp/${out//\//_}" "$pkg"
  )
  mv -f "$tmp/${out//\//_}" "$dir/$out"
  printf '%s\n' "$stamp" >"$dir/$out.stamp"
  log "built $out in $((SECONDS - start))s"
}

# Debian's runc, iptables and conntrack.
debs=()
for p in runc:runc iptables:iptables conntrack:conntrack; do
  command -v "${p%%:*}" >/dev/null || debs+=("${p#*:}")
done
if ((${#debs[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing ${debs[*]} (apt-get install)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${debs[@]}" >/dev/null
  else
    log "missing ${debs[*]}: install them (Debian: apt-get install ${debs[*]})"
    exit 1
  fi
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # one build at a time per directory
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for c in kubelet kube-proxy kube-scheduler kube-controller-manager kubectl; do
  build cluster "$c" "k8s.io/kubernetes/cmd/$c" "$k8s_ldflags"
done
for c in containerd containerd-shim-runc-v2 ctr; do
  build node "$c" "github.com/containerd/containerd/v2/cmd/$c" "$containerd_ldflags"
done
for p in main/bridge ipam/host-local main/loopback meta/portmap; do
  build node "cni/${p#*/}" "github.com/containernetworking/plugins/plugins/$p" "$cni_ldflags"
done
log "up to date in $dir (kubernetes ${K8S_VERSION}, containerd ${CONTAINERD_VERSION}, CNI plugins ${CNI_VERSION})"

echo "$dir"
