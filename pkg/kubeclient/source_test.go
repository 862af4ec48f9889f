package kubeclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// getenvOf looks names up in environ, a list of "name=value".
func getenvOf(environ []string) func(string) string {
	return func(name string) string {
		for _, kv := range environ {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v
			}
		}
		return ""
	}
}

// The sidecar finds its API server as kubectl does: --kubeconfig,
// else $KUBECONFIG, else in-cluster. Each case loads the REST config and
// checks which server it names.
func TestKubeconfigFlagThenKUBECONFIGThenInCluster(t *testing.T) {
	fromFlag := kubeconfigFor(t, "https://flag.example:6443")
	fromEnv := kubeconfigFor(t, "https://env.example:6443")
	other := kubeconfigFor(t, "https://other.example:6443")
	missing := filepath.Join(t.TempDir(), "missing")
	list := func(paths ...string) string { return strings.Join(paths, string(filepath.ListSeparator)) }
	cases := []struct {
		name    string
		flag    string
		env     []string
		server  string // want this server, or
		mention string // an error mentioning this
	}{
		{"flag", fromFlag, nil, "https://flag.example:6443", ""},
		{"flag beats KUBECONFIG", fromFlag, []string{"KUBECONFIG=" + fromEnv}, "https://flag.example:6443", ""},
		{"KUBECONFIG", "", []string{"KUBECONFIG=" + fromEnv}, "https://env.example:6443", ""},
		{"KUBECONFIG beats in-cluster", "", []string{"KUBECONFIG=" + fromEnv, "KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443"}, "https://env.example:6443", ""},
		{"KUBECONFIG list: the first file wins", "", []string{"KUBECONFIG=" + list(fromEnv, other)}, "https://env.example:6443", ""},
		{"KUBECONFIG list: missing files are skipped", "", []string{"KUBECONFIG=" + list(missing, other)}, "https://other.example:6443", ""},
		{"KUBECONFIG with no file that exists", "", []string{"KUBECONFIG=" + missing}, "", "KUBECONFIG: no file it lists exists"},
		{"empty KUBECONFIG is unset", "", []string{"KUBECONFIG="}, "", "--kubeconfig: not running in a Kubernetes cluster"},
		{"neither", "", nil, "", "--kubeconfig: not running in a Kubernetes cluster"},
		{"missing flag file is not replaced by KUBECONFIG", missing, []string{"KUBECONFIG=" + fromEnv}, "", "--kubeconfig: kubeconfig \"" + missing + "\" does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ResolveSource(c.flag, getenvOf(c.env)).RESTConfig()
			switch {
			case c.mention != "":
				if err == nil || !strings.Contains(err.Error(), c.mention) {
					t.Fatalf("error %v, want one mentioning %q", err, c.mention)
				}
			case err != nil:
				t.Fatal(err)
			case cfg.Host != c.server:
				t.Fatalf("server %q, want %q", cfg.Host, c.server)
			}
		})
	}
}

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
			cfg, err := ResolveSource(c.kubeconfig, nil).RESTConfig()
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
	if err := os.WriteFile(path, env.Env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ResolveSource(path, nil).RESTConfig()
	if err != nil {
		t.Fatalf("RESTConfig: %v", err)
	}
	client, err := NewClient(cfg, Options{})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if _, err := client.Leases(newNamespace(t)).Get(ctxFor(t), "via-kubeconfig", metav1.GetOptions{}); err == nil ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("Get through the kubeconfig: got %v, want not found", err)
	}
}
