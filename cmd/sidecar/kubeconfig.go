package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
)

// kubeconfigSource says where the lease backend finds its API server, in
// kubectl's order: the --kubeconfig file, else the files listed in
// $KUBECONFIG, else the Pod's service account (in-cluster). Unlike
// kubectl, ~/.kube/config is never read: a sidecar must not pick up a
// developer's current context by accident.
type kubeconfigSource struct {
	// from is "--kubeconfig", "KUBECONFIG", or "" for in-cluster.
	from  string
	paths []string
}

func resolveKubeconfig(flag string, environ []string) kubeconfigSource {
	if flag != "" {
		return kubeconfigSource{from: "--kubeconfig", paths: []string{flag}}
	}
	env, _ := lookup(environ, "KUBECONFIG")
	var paths []string
	for _, p := range filepath.SplitList(env) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return kubeconfigSource{}
	}
	return kubeconfigSource{from: "KUBECONFIG", paths: paths}
}

// String says where the connection comes from, for logs.
func (k kubeconfigSource) String() string {
	if k.from == "" {
		return "in-cluster"
	}
	return k.from + "=" + strings.Join(k.paths, string(filepath.ListSeparator))
}

// restConfig loads the connection settings. Its errors name the flag or
// the variable to fix.
func (k kubeconfigSource) restConfig() (*rest.Config, error) {
	switch k.from {
	case "":
		cfg, err := lease.RESTConfig(lease.ClientOptions{})
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	case "--kubeconfig":
		cfg, err := lease.RESTConfig(lease.ClientOptions{Kubeconfig: k.paths[0]})
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	}
	// $KUBECONFIG: the files are merged as kubectl merges them (the first
	// file to set a value wins); files that do not exist are skipped, but
	// not all of them.
	found := false
	for _, p := range k.paths {
		_, err := os.Stat(p)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
	}
	if !found {
		return nil, fmt.Errorf("KUBECONFIG: no file it lists exists: %q", k.paths)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{Precedence: k.paths},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("KUBECONFIG %q: %w", k.paths, err)
	}
	return cfg, nil
}
