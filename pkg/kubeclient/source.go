package kubeclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Source says where the sidecar finds its API server, in kubectl's order:
// the --kubeconfig file, else the files listed in $KUBECONFIG, else the
// Pod's service account (in-cluster). Unlike kubectl, ~/.kube/config is
// never read: a sidecar must not pick up a developer's current context by
// accident. The zero Source is in-cluster.
type Source struct {
	// from is "--kubeconfig", "KUBECONFIG", or "" for in-cluster.
	from  string
	paths []string
}

// ResolveSource returns the Source named by flagValue (the --kubeconfig
// flag) or, when it is "", by getenv("KUBECONFIG"). Empty entries of the
// list are ignored; a list with none left means in-cluster. getenv may be
// nil (no environment). Nothing is read until RESTConfig.
func ResolveSource(flagValue string, getenv func(string) string) Source {
	if flagValue != "" {
		return Source{from: "--kubeconfig", paths: []string{flagValue}}
	}
	var env string
	if getenv != nil {
		env = getenv("KUBECONFIG")
	}
	var paths []string
	for _, p := range filepath.SplitList(env) {
		if p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return Source{}
	}
	return Source{from: "KUBECONFIG", paths: paths}
}

// String says where the connection comes from, for logs.
func (s Source) String() string {
	if s.from == "" {
		return "in-cluster"
	}
	return s.from + "=" + strings.Join(s.paths, string(filepath.ListSeparator))
}

// RESTConfig loads the connection settings. Its errors name the flag or
// the variable to fix, and say what is missing: the file, or the
// environment of a Pod.
func (s Source) RESTConfig() (*rest.Config, error) {
	switch s.from {
	case "":
		cfg, err := inClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	case "--kubeconfig":
		cfg, err := fileConfig(s.paths[0])
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	}
	// $KUBECONFIG: the files are merged as kubectl merges them (the first
	// file to set a value wins); files that do not exist are skipped, but
	// not all of them.
	found := false
	for _, p := range s.paths {
		_, err := os.Stat(p)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
	}
	if !found {
		return nil, fmt.Errorf("KUBECONFIG: no file it lists exists: %q", s.paths)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{Precedence: s.paths},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("KUBECONFIG %q: %w", s.paths, err)
	}
	return cfg, nil
}

// inClusterConfig is the configuration of the Pod's service account.
func inClusterConfig() (*rest.Config, error) {
	cfg, err := rest.InClusterConfig()
	switch {
	case errors.Is(err, rest.ErrNotInCluster):
		return nil, errors.New("not running in a Kubernetes cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set); " +
			"give a kubeconfig file (--kubeconfig) to reach an API server from elsewhere")
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("in-cluster configuration: the Pod has no service-account token (is automountServiceAccountToken false?): %w", err)
	case err != nil:
		return nil, fmt.Errorf("in-cluster configuration: %w", err)
	}
	return cfg, nil
}

// fileConfig is the configuration of the kubeconfig file at path.
func fileConfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kubeconfig %q does not exist", path)
		}
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
	}
	return cfg, nil
}
