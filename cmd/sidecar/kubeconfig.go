package main

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
)

// kubeconfigSource says where the lease backend finds its API server:
// the --kubeconfig file, else the Pod's service account (in-cluster).
type kubeconfigSource struct {
	path string // "" for in-cluster
}

func resolveKubeconfig(flag string, _ []string) kubeconfigSource {
	return kubeconfigSource{path: flag}
}

// String says where the connection comes from, for logs.
func (k kubeconfigSource) String() string {
	if k.path == "" {
		return "in-cluster"
	}
	return "--kubeconfig=" + k.path
}

// restConfig loads the connection settings. Its errors name the flag.
func (k kubeconfigSource) restConfig() (*rest.Config, error) {
	cfg, err := lease.RESTConfig(lease.ClientOptions{Kubeconfig: k.path})
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return cfg, nil
}
