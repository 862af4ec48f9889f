package main

import (
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// kubeClient holds a process's Kubernetes clients, each built on first
// use, so a process that needs none never loads a kubeconfig. The
// election's Lease has a client of its own, with its own connections: a
// request that runs out of time closes its client's connections (so the
// retry dials anew), and a Pod patch or an Event slowed by an admission
// webhook must not abort a renewal in flight or reset the watch. The Pod
// publisher and the Events share the other one.
type kubeClient struct {
	forElection, forOthers func() (*kubeclient.Client, error)
}

func newKubeClient(cfg electionConfig) *kubeClient {
	build := func() (*kubeclient.Client, error) {
		rc, err := cfg.kube.source.restConfig()
		if err != nil {
			return nil, err
		}
		return lease.NewClient(rc, lease.ClientOptions{
			Timeout:   cfg.renewDeadline / 2,
			QPS:       cfg.kube.qps,
			Burst:     cfg.kube.burst,
			UserAgent: "leader-sidecar/" + currentVersion(),
		})
	}
	return &kubeClient{forElection: sync.OnceValues(build), forOthers: sync.OnceValues(build)}
}
