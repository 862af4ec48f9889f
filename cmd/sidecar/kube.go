package main

import (
	"sync"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// kubeClient is the one Kubernetes client of a process, built on first
// use: the lease backend, the Events and the Pod publisher share it, and a
// process that needs none never loads a kubeconfig.
type kubeClient struct {
	get func() (*kubeclient.Client, error)
}

func newKubeClient(cfg electionConfig) *kubeClient {
	return &kubeClient{get: sync.OnceValues(func() (*kubeclient.Client, error) {
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
	})}
}
