#!/usr/bin/env bash
# Prints the image references the example chart uses by default, read from
# charts/leader-sidecar-example/values.yaml, one line each:
#
#   sidecar ghcr.io/leader-sidecar/leader-sidecar:v0.1.0
#   app ghcr.io/leader-sidecar/example-worker:v0.1.0
#
# hack/cluster-images.sh imports its images under these references, so that
# `helm install demo charts/leader-sidecar-example` needs no --set, and
# hack/image.sh names its images after their repositories. With -repository
# it prints the repositories alone ("sidecar ghcr.io/leader-sidecar/leader-sidecar").
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
values=$root/charts/leader-sidecar-example/values.yaml

# value SECTION KEY: the KEY of SECTION's image in the example chart's values.
value() {
  awk -v section="$1" -v key="$2" '
    /^[^ #]/ { in_section = ($0 ~ "^" section ":"); in_image = 0 }
    in_section && /^  image:/ { in_image = 1; next }
    in_section && /^  [^ ]/ { in_image = 0 }
    in_image && $1 == key ":" { gsub(/"/, "", $2); print $2; exit }
  ' "$values"
}

for section in sidecar app; do
  repository=$(value "$section" repository) tag=$(value "$section" tag)
  [[ -n $repository && -n $tag ]] ||
    { echo "chart-images: cannot read $section.image.repository and .tag from $values" >&2; exit 1; }
  if [[ ${1:-} == -repository ]]; then
    echo "$section $repository"
  else
    echo "$section $repository:$tag"
  fi
done
