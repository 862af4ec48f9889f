// Package cluster holds the end-to-end tests that run the product as Pods
// on a real one-node Kubernetes cluster (hack/cluster.sh: kubelet,
// containerd, runc, images built from this repository). They build only
// with the tag cluster:
//
//	make test-cluster
//
// starts the cluster, runs them and stops it. To keep a cluster between
// runs:
//
//	export LEADER_SIDECAR_KUBECONFIG=$(hack/cluster.sh up | tail -1)
//	go test -tags cluster -count=1 -parallel 4 ./e2e/cluster/...
//	hack/cluster.sh down
//
// Without LEADER_SIDECAR_KUBECONFIG the tests run hack/cluster.sh up
// themselves and leave the cluster running. LEADER_SIDECAR_SOAK (default
// 2m) is how long TestReadinessModes watches for container restarts; its
// four modes run in parallel, hence -parallel 4 on this 2-core machine.
package cluster
