package kubeclient

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoKubeconfig is KubectlConfig's error when no kubeconfig is found and
// the process does not run in a Pod: the caller may say what else it
// could be given.
var ErrNoKubeconfig = errors.New("no kubeconfig found (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a Pod")

// KubectlConfig finds the API server and the namespace as kubectl does,
// for commands an operator runs from a workstation or as a kubectl
// plugin (sidecar status): the kubeconfig file, else the files listed in
// $KUBECONFIG, else ~/.kube/config, else the Pod's service account; the
// context named (else the current one); the namespace of that context,
// else "default" (in a Pod: $POD_NAMESPACE, else the service account's).
//
// Unlike Source, which the sidecar uses, it reads ~/.kube/config: it
// serves a person who means their current context. getenv supplies
// KUBECONFIG and HOME (nil: no environment). Errors name the flag or the
// variable to fix.
func KubectlConfig(kubeconfig, context string, getenv func(string) string) (*rest.Config, string, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	if kubeconfig == "" {
		for _, p := range filepath.SplitList(getenv("KUBECONFIG")) {
			if p != "" {
				rules.Precedence = append(rules.Precedence, p)
			}
		}
		if len(rules.Precedence) == 0 && getenv("HOME") != "" {
			rules.Precedence = []string{filepath.Join(getenv("HOME"), ".kube", "config")}
		}
	}
	where := "the current context"
	if context != "" {
		where = fmt.Sprintf("context %q (--context)", context)
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			// client-go's own words would send the reader to
			// KUBERNETES_MASTER, a variable nobody should set.
			return nil, "", ErrNoKubeconfig
		}
		return nil, "", fmt.Errorf("kubeconfig, %s: %w", where, err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig, %s: namespace: %w", where, err)
	}
	return cfg, ns, nil
}
