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
// themselves and leave the cluster running. Every test works in a
// namespace of its own and runs in parallel with the others, four at a
// time (-parallel 4): most of their time is spent waiting for Pods, a
// lease duration or a soak. Three run first, one at a time:
// TestExampleChartFencesPausedLeader, whose short leases Pods starting
// and stopping beside it would starve, TestExampleChartFailoverOnDelete,
// and TestExampleChartShardScaling, whose short timings over five
// replicas of eight shards load the API server. LEADER_SIDECAR_SOAK (default 2m) is how long
// TestReadinessModes watches for container restarts.
package cluster
