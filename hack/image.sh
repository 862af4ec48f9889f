#!/usr/bin/env bash
# Builds the release images without a container engine or a registry, for
# linux/amd64 and linux/arm64, as OCI image layout archives, and prints
# their paths, one a line (progress goes to stderr):
#
#   hack/image.sh [OUTDIR]          # default bin/image
#     OUTDIR/leader-sidecar-$VERSION.oci.tar   the sidecar, entrypoint /sidecar
#     OUTDIR/example-worker-$VERSION.oci.tar   the example app, entrypoint /worker
#
# Each archive holds one OCI image index (one manifest per platform) tagged
# $VERSION under the repository the charts use by default
# (hack/chart-images.sh), for example
# ghcr.io/leader-sidecar/leader-sidecar:v0.1.0. Push one with
#
#   skopeo copy --all oci-archive:bin/image/leader-sidecar-v0.1.0.oci.tar \
#     docker://ghcr.io/leader-sidecar/leader-sidecar:v0.1.0
#
# The images hold what the Dockerfile's does: the binary, built as
# `make build` builds it (CGO_ENABLED=0, -trimpath, the same -ldflags) for
# each platform, on a base with the contents of distroless static nonroot
# (CA certificates, tzdata, /etc/passwd with nonroot), as uid 65532. They
# are reproducible: the same sources, Go toolchain and base files (this
# machine's CA bundle and tzdata) give the same digests.
#
# Environment: VERSION (default: git describe), LDFLAGS (default: make
# build's), PLATFORMS (default linux/amd64,linux/arm64), WORKER=0 to skip
# the example app's image.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "image: $*" >&2; }
VERSION=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo devel)}
LDFLAGS=${LDFLAGS:-"-s -w -X main.version=$VERSION"}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
WORKER=${WORKER:-1}
out=${1:-$root/bin/image}
[[ $# -le 1 ]] || { log "usage: hack/image.sh [OUTDIR]"; exit 2; }
[[ $VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  { log "VERSION \"$VERSION\" cannot be an image tag (letters, digits, _ . -)"; exit 2; }

repository() { "$root/hack/chart-images.sh" -repository | awk -v s="$1" '$1 == s { print $2 }'; }
sidecar_repo=$(repository sidecar)
app_repo=$(repository app)

mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

export GOWORK=off CGO_ENABLED=0
(cd "$root/hack/tools/image" && GOFLAGS=-mod=readonly go build -trimpath -o "$tmp/image-tool" .)
IFS=, read -ra platforms <<<"$PLATFORMS"
for platform in "${platforms[@]}"; do
  os=${platform%%/*} arch=${platform#*/}
  arch=${arch%%/*}
  log "building for $os/$arch ($VERSION)"
  (cd "$root" && GOOS=$os GOARCH=$arch nice -n 10 go build -trimpath -ldflags="$LDFLAGS" \
    -o "$tmp/$os-$arch/sidecar" ./cmd/sidecar)
  if [[ $WORKER == 1 ]]; then
    (cd "$root" && GOOS=$os GOARCH=$arch nice -n 10 go build -trimpath -ldflags="-s -w" \
      -o "$tmp/$os-$arch/worker" ./examples/worker)
  fi
done

labels=(
  -label "org.opencontainers.image.source=https://github.com/leader-sidecar/leader-sidecar"
  -label "org.opencontainers.image.version=$VERSION"
  -label "org.opencontainers.image.licenses=Apache-2.0"
)
"$tmp/image-tool" -o "$out/leader-sidecar-$VERSION.oci.tar" -platforms "$PLATFORMS" \
  -expose 4040/tcp -expose 8081/tcp "${labels[@]}" \
  -label "org.opencontainers.image.title=leader-sidecar" \
  -image "$sidecar_repo:$VERSION=$tmp/{os}-{arch}/sidecar"
echo "$out/leader-sidecar-$VERSION.oci.tar"
if [[ $WORKER == 1 ]]; then
  "$tmp/image-tool" -o "$out/example-worker-$VERSION.oci.tar" -platforms "$PLATFORMS" "${labels[@]}" \
    -label "org.opencontainers.image.title=example-worker" \
    -image "$app_repo:$VERSION=$tmp/{os}-{arch}/worker"
  echo "$out/example-worker-$VERSION.oci.tar"
fi
