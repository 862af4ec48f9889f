#!/usr/bin/env bash
# Tries the example chart on a local kind cluster, for people with Docker:
#
#   hack/kind-demo.sh                 # readiness mode none
#   MODE=label hack/kind-demo.sh      # none | probe | pod-condition | label
#   hack/kind-demo.sh delete          # remove the kind cluster
#
# It builds the sidecar image from the Dockerfile and an image of
# examples/worker (the app), creates the kind cluster (unless it exists),
# loads both images into it, installs charts/leader-sidecar-example with the
# pinned helm of hack/helm.sh, waits for a leader and shows it. Then try:
#
#   kubectl -n $NAMESPACE delete pod <the leader's pod>   # a standby takes over at once
#   kubectl -n $NAMESPACE logs deploy/demo-leader-sidecar-example -c app
#
# Needs: docker, kind, kubectl and Go (for helm and the worker). The tests do
# not run this script; nothing here is needed by them.
#
# Environment: CLUSTER (default leader-sidecar-demo), NAMESPACE (demo),
# RELEASE (demo), MODE (none), REPLICAS (3), TAG (dev).
set -euo pipefail

CLUSTER=${CLUSTER:-leader-sidecar-demo}
NAMESPACE=${NAMESPACE:-demo}
RELEASE=${RELEASE:-demo}
MODE=${MODE:-none}
REPLICAS=${REPLICAS:-3}
TAG=${TAG:-dev}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "kind-demo: $*" >&2; }

for tool in docker kind kubectl go; do
  command -v "$tool" >/dev/null || { log "needs $tool on PATH"; exit 1; }
done

if [[ ${1:-} == delete ]]; then
  kind delete cluster --name "$CLUSTER"
  exit 0
fi

case $MODE in none | probe | pod-condition | label) ;; *) log "MODE must be none, probe, pod-condition or label"; exit 2 ;; esac

log "building the sidecar image leader-sidecar:$TAG"
docker build --build-arg VERSION="$TAG" -t "leader-sidecar:$TAG" "$root"

# The repository's .dockerignore keeps examples/ out of the build context,
# so the worker is built here and copied into a distroless image of its own.
log "building the app image example/worker:$TAG"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$(docker version -f '{{.Server.Arch}}') \
  go build -trimpath -o "$work/worker" ./examples/worker)
cat >"$work/Dockerfile" <<'DOCKERFILE'
FROM gcr.io/distroless/static-debian12:nonroot
COPY worker /worker
USER 65532:65532
ENTRYPOINT ["/worker"]
DOCKERFILE
docker build -t "example/worker:$TAG" "$work"

if ! kind get clusters | grep -qx "$CLUSTER"; then
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 120s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null
kind load docker-image --name "$CLUSTER" "leader-sidecar:$TAG" "example/worker:$TAG"

helm=$("$root/hack/helm.sh" | tail -1)
"$helm" dependency build "$root/charts/leader-sidecar-example" >/dev/null
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# The namespace enforces Pod Security "restricted", which the chart meets.
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null

log "installing $RELEASE (readiness mode $MODE, $REPLICAS replicas)"
"$helm" upgrade --install "$RELEASE" "$root/charts/leader-sidecar-example" \
  --namespace "$NAMESPACE" \
  --set replicaCount="$REPLICAS" \
  --set sidecar.image.repository=leader-sidecar --set sidecar.image.tag="$TAG" \
  --set sidecar.image.pullPolicy=Never \
  --set app.image.repository=example/worker --set app.image.tag="$TAG" \
  --set app.image.pullPolicy=Never \
  --set sidecar.readiness.mode="$MODE"

lease=$(kubectl -n "$NAMESPACE" get deploy -l app.kubernetes.io/instance="$RELEASE" \
  -o jsonpath='{.items[0].metadata.name}')
log "waiting for a leader on Lease $lease"
for _ in $(seq 120); do
  holder=$(kubectl -n "$NAMESPACE" get lease "$lease" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [[ -n $holder ]] && break
  sleep 1
done
[[ -n ${holder:-} ]] || { log "no leader after 120s"; kubectl -n "$NAMESPACE" get pods; exit 1; }

echo "leader: $holder (token $(kubectl -n "$NAMESPACE" get lease "$lease" -o jsonpath='{.spec.leaseTransitions}'))"
kubectl -n "$NAMESPACE" get pods -l app.kubernetes.io/instance="$RELEASE" -L leader-sidecar.io/role
