package lease

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRESTConfigErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [ {"), 0o600); err != nil {
		t.Fatal(err)
	}
	noContext := filepath.Join(dir, "no-context")
	if err := os.WriteFile(noContext, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		kubeconfig string
		env        map[string]string
		want       []string
	}{
		{"kubeconfig missing", filepath.Join(dir, "nope"), nil, []string{"kubeconfig", "nope", "does not exist"}},
		{"kubeconfig unparsable", garbage, nil, []string{"kubeconfig", garbage}},
		{"kubeconfig without a cluster", noContext, nil, []string{"kubeconfig", noContext}},
		{"not in a cluster", "", map[string]string{"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""},
			[]string{"not running in a Kubernetes cluster", "--kubeconfig"}},
		{"in a cluster without a token", "", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
			[]string{"in-cluster configuration", "service-account token"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.name == "in a cluster without a token" {
				if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
					t.Skip("a service-account token is mounted here")
				}
			}
			cfg, err := RESTConfig(ClientOptions{Kubeconfig: c.kubeconfig})
			if err == nil {
				t.Fatalf("got a config for %s, want an error", cfg.Host)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestRESTConfigKubeconfig loads envtest's own kubeconfig and uses it.
func TestRESTConfigKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, testEnv.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(ClientOptions{Kubeconfig: path})
	if err != nil {
		t.Fatalf("RESTConfig: %v", err)
	}
	client, err := NewClient(cfg, ClientOptions{})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if _, _, err := newBackend(t, client, newNamespace(t), "via-kubeconfig").Get(ctxFor(t)); err == nil ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("Get through the kubeconfig: got %v, want not found", err)
	}
}
