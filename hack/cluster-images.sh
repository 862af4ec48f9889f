#!/usr/bin/env bash
# Builds the images of the one-node test cluster without a registry or a
# container engine, as one OCI image layout archive for
# `ctr -n k8s.io images import`, and prints its path as the last line of
# stdout (progress goes to stderr):
#
#   images=$(hack/cluster-images.sh | tail -1)
#
# The archive holds, under the references the charts use by default (read
# from charts/leader-sidecar-example/values.yaml by hack/chart-images.sh, so
# that `helm install demo charts/leader-sidecar-example` needs no --set;
# `hack/cluster-images.sh --refs` prints them without building):
#   the sidecar        ./cmd/sidecar, entrypoint /sidecar
#   the example app    ./examples/worker, entrypoint /worker
#   the Pod sandbox    registry.k8s.io/pause (hack/tools/image/pause), the
#                      image containerd is configured with (PAUSE_IMAGE)
# Each is a static binary (CGO off) on a base with the contents of
# distroless static nonroot, assembled by hack/tools/image, for this
# machine's architecture only (hack/image.sh makes the multi-platform
# release images). Builds run niced, one at a time. Set
# LEADER_SIDECAR_IMAGES_DIR to choose the directory, VERSION the sidecar's
# --version (default: git describe).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "cluster-images: $*" >&2; }
PAUSE_IMAGE=${PAUSE_IMAGE:-registry.k8s.io/pause:3.10.2}
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo devel)}
dir=${LEADER_SIDECAR_IMAGES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leader-sidecar/images}

refs=$("$root/hack/chart-images.sh")
sidecar_ref=$(awk '$1 == "sidecar" { print $2 }' <<<"$refs")
app_ref=$(awk '$1 == "app" { print $2 }' <<<"$refs")
if [[ ${1:-} == --refs ]]; then # the references alone, without building
  printf '%s\n' "$sidecar_ref" "$app_ref" "$PAUSE_IMAGE"
  exit 0
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

export GOWORK=off CGO_ENABLED=0 GOOS=linux
(cd "$root/hack/tools/image" && GOFLAGS=-mod=readonly nice -n 19 go build -trimpath -o "$tmp/image-tool" . &&
  GOFLAGS=-mod=readonly nice -n 19 go build -trimpath -ldflags="-s -w" -o "$tmp/pause" ./pause)
(cd "$root" && nice -n 19 go build -trimpath -ldflags="-s -w -X main.version=$VERSION" -o "$tmp/sidecar" ./cmd/sidecar &&
  nice -n 19 go build -trimpath -ldflags="-s -w" -o "$tmp/worker" ./examples/worker)

"$tmp/image-tool" -o "$dir/images.tar" \
  -image "$sidecar_ref=$tmp/sidecar" -image "$app_ref=$tmp/worker" -image "$PAUSE_IMAGE=$tmp/pause"
printf '%s\n' "$sidecar_ref" "$app_ref" "$PAUSE_IMAGE" >"$dir/images.txt"
log "$sidecar_ref, $app_ref, $PAUSE_IMAGE (sidecar $VERSION)"

echo "$dir/images.tar"
