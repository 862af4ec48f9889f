#!/usr/bin/env bash
# Builds everything a release publishes into OUTDIR (default dist), and
# prints each artifact's path, one a line (progress goes to stderr):
#
#   VERSION=v0.2.0 hack/release.sh [OUTDIR]     # or: make release VERSION=v0.2.0
#
#   leader-sidecar-$VERSION-{linux,darwin}-{amd64,arm64}.tar.gz
#       the sidecar binary (built as `make build` builds it, CGO off, for
#       that OS and architecture) with LICENSE and README.md
#   leader-sidecar-$VERSION.oci.tar, example-worker-$VERSION.oci.tar
#       the images for linux/amd64 and linux/arm64 (hack/image.sh)
#   leader-sidecar-lib-X.Y.Z.tgz, leader-sidecar-example-X.Y.Z.tgz,
#   leader-sidecar-injector-X.Y.Z.tgz
#       the charts, `helm package`d (version X.Y.Z, appVersion vX.Y.Z)
#   plugins/leader.yaml
#       the krew manifest of the kubectl plugin (kubectl leader status): the
#       four archives, each with its SHA-256 and its URL under DOWNLOAD_URL,
#       their sidecar installed as kubectl-leader
#   SHA256SUMS
#       the SHA-256 of every file above, as `sha256sum -c SHA256SUMS` reads it
#
# VERSION must be vX.Y.Z and every version the charts carry must agree with
# it (hack/set-version.sh --check): a release whose charts would pull
# another version's image is refused with exit status 2. Files of an
# earlier release in OUTDIR are replaced; nothing else there is touched.
#
# The release is built from a commit: a working tree with uncommitted
# changes is refused (exit status 2). Once every artifact is built it tags
# that commit, annotated, in the local repository: vX.Y.Z for the module and
# pkg/fence/vX.Y.Z for pkg/fence, a Go module of its own (`go get
# .../pkg/fence@vX.Y.Z` needs that tag). A tag that already names the commit
# is kept; one that names another commit is refused before anything is built.
#
# Publishing is not done here. With the registry credentials at hand:
#
#   git push origin v0.2.0 pkg/fence/v0.2.0
#   cd dist && sha256sum -c SHA256SUMS
#   skopeo copy --all --preserve-digests oci-archive:leader-sidecar-v0.2.0.oci.tar:v0.2.0 \
#     docker://ghcr.io/leader-sidecar/leader-sidecar:v0.2.0        # and example-worker
#   helm push leader-sidecar-lib-0.2.0.tgz oci://ghcr.io/leader-sidecar/charts
#   helm push leader-sidecar-example-0.2.0.tgz oci://ghcr.io/leader-sidecar/charts
#   helm push leader-sidecar-injector-0.2.0.tgz oci://ghcr.io/leader-sidecar/charts
#   # and the four archives as the GitHub release v0.2.0's assets, where
#   # plugins/leader.yaml points (kubectl krew install --manifest=...)
#
# Environment: VERSION (required), LDFLAGS (default: make build's), HELM
# (default: the helm of hack/helm.sh), DOWNLOAD_URL (where the archives are
# published, the manifest's URLs: default the GitHub release's,
# https://github.com/leader-sidecar/leader-sidecar/releases/download/$VERSION).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "release: $*" >&2; }
[[ $# -le 1 ]] || { log "usage: VERSION=vX.Y.Z hack/release.sh [OUTDIR]"; exit 2; }
VERSION=${VERSION:-}
if ! [[ $VERSION =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
  log "VERSION \"$VERSION\" is not of the form vX.Y.Z (for example: make release VERSION=v1.2.3)"
  exit 2
fi
rc=0
check=$("$root/hack/set-version.sh" --check "$VERSION" 2>&1) || rc=$?
if [[ $rc != 0 ]]; then
  sed 's/^set-version: /release: /' <<<"$check" >&2
  [[ $rc == 2 ]] || exit 1
  log "VERSION $VERSION differs from the versions the charts carry, named above: give theirs, or run hack/set-version.sh $VERSION and commit first"
  exit 2
fi
tags=("$VERSION" "pkg/fence/$VERSION")
head=$(git -C "$root" rev-parse --verify --quiet HEAD) ||
  { log "$root has no git commit: a release is built from one, and tagged"; exit 2; }
if [[ -n $(git -C "$root" status --porcelain) ]]; then
  log "the working tree has uncommitted changes (git status): a release is built from a commit, which its tags name; commit or stash them first"
  exit 2
fi
for tag in "${tags[@]}"; do
  if at=$(git -C "$root" rev-parse --verify --quiet "refs/tags/$tag^{commit}"); then
    [[ $at == "$head" ]] ||
      { log "tag $tag already names commit $at, not HEAD $head: a released version is never moved; release another version"; exit 2; }
  fi
done
LDFLAGS=${LDFLAGS:-"-s -w -X main.version=$VERSION"}
[[ $LDFLAGS == *"-X main.version=$VERSION"* ]] ||
  { log "LDFLAGS \"$LDFLAGS\" do not stamp main.version=$VERSION"; exit 2; }
HELM=${HELM:-$("$root/hack/helm.sh" | tail -1)}
DOWNLOAD_URL=${DOWNLOAD_URL:-https://github.com/leader-sidecar/leader-sidecar/releases/download/$VERSION}
[[ $DOWNLOAD_URL == https://* ]] || { log "DOWNLOAD_URL \"$DOWNLOAD_URL\" is not an https:// URL, which krew requires"; exit 2; }
chart_version=${VERSION#v}

out=${1:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d "$out/.release.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# Binaries: one archive per OS and architecture, reproducible (sorted
# entries, fixed times and owners, gzip without a name or time).
export GOWORK=off CGO_ENABLED=0
for os in linux darwin; do
  for arch in amd64 arm64; do
    name=leader-sidecar-$VERSION-$os-$arch
    log "building $name"
    mkdir -p "$stage/bin/$name"
    (cd "$root" && GOOS=$os GOARCH=$arch nice -n 10 go build -trimpath -ldflags="$LDFLAGS" \
      -o "$stage/bin/$name/sidecar" ./cmd/sidecar)
    cp "$root/LICENSE" "$root/README.md" "$stage/bin/$name/"
    tar -C "$stage/bin" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
      --mode='u+rwX,go+rX,go-w' -cf - "$name" | gzip -9n >"$stage/$name.tar.gz"
  done
done
rm -rf "$stage/bin"

# Images.
VERSION=$VERSION LDFLAGS=$LDFLAGS "$root/hack/image.sh" "$stage" >/dev/null

# Charts: packaged from a copy, so the dependency build leaves the
# repository as it is.
cp -r "$root/charts" "$stage/charts"
export HELM_CACHE_HOME=$stage/helm/cache HELM_CONFIG_HOME=$stage/helm/config HELM_DATA_HOME=$stage/helm/data
"$HELM" dependency build "$stage/charts/leader-sidecar-example" >&2
for chart in leader-sidecar-lib leader-sidecar-example leader-sidecar-injector; do
  "$HELM" lint --strict "$stage/charts/$chart" >&2
  "$HELM" package "$stage/charts/$chart" --destination "$stage" >&2
  [[ -f $stage/$chart-$chart_version.tgz ]] || { log "helm package did not write $chart-$chart_version.tgz"; exit 1; }
done
rm -rf "$stage/charts" "$stage/helm"

# The kubectl plugin's krew manifest: one platform per archive, with the
# archive's SHA-256; krew copies the sidecar out of it as kubectl-leader.
mkdir "$stage/plugins"
{
  cat <<MANIFEST
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: leader
spec:
  version: $VERSION
  homepage: https://github.com/leader-sidecar/leader-sidecar
  shortDescription: Show who holds each leader election (Lease)
  description: |
    kubectl leader status lists the leader elections of a namespace (-A:
    all): the Leases that leader-sidecar and client-go's leaderelection
    write, with holder, fencing token, term, last renewal, hand-off and
    whether one looks stale; -o wide, -o json, --watch. It is the
    leader-sidecar binary, installed as kubectl-leader.
  platforms:
MANIFEST
  for os in linux darwin; do
    for arch in amd64 arm64; do
      name=leader-sidecar-$VERSION-$os-$arch
      sum=$(sha256sum -- "$stage/$name.tar.gz" | cut -d' ' -f1)
      cat <<PLATFORM
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $DOWNLOAD_URL/$name.tar.gz
    sha256: $sum
    files:
    - from: $name/sidecar
      to: kubectl-leader
    - from: $name/LICENSE
      to: .
    bin: kubectl-leader
PLATFORM
    done
  done
} >"$stage/plugins/leader.yaml"

(cd "$stage" && sha256sum -- *.tar.gz *.oci.tar *.tgz plugins/leader.yaml >SHA256SUMS)

# Replace an earlier release's files in OUTDIR, and only those.
rm -f "$out"/leader-sidecar-v*.tar.gz "$out"/leader-sidecar-v*.oci.tar "$out"/example-worker-v*.oci.tar \
  "$out"/leader-sidecar-lib-*.tgz "$out"/leader-sidecar-example-*.tgz "$out"/leader-sidecar-injector-*.tgz "$out/SHA256SUMS" \
  "$out/plugins/leader.yaml"
mkdir -p "$out/plugins"
mv "$stage/plugins/leader.yaml" "$out/plugins/"
echo "$out/plugins/leader.yaml"
rmdir "$stage/plugins"
for f in "$stage"/*; do
  mv "$f" "$out/"
  echo "$out/$(basename "$f")"
done
for tag in "${tags[@]}"; do
  if ! git -C "$root" rev-parse --verify --quiet "refs/tags/$tag" >/dev/null; then
    git -C "$root" tag -a -m "leader-sidecar $VERSION" "$tag" "$head"
    log "tagged $head as $tag"
  fi
done
log "$VERSION in $out; push the tags with: git push origin ${tags[*]}"
