package kubeclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeContexts writes a kubeconfig with two contexts, a (namespace
// shop, the current one) and b (no namespace), on two servers.
func writeContexts(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "config")
	cfg := `apiVersion: v1
kind: Config
clusters:
- {name: one, cluster: {server: "https://one.example:6443"}}
- {name: two, cluster: {server: "https://two.example:6443"}}
users: [{name: u, user: {token: x}}]
contexts:
- {name: a, context: {cluster: one, user: u, namespace: shop}}
- {name: b, context: {cluster: two, user: u}}
current-context: a
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// KubectlConfig finds the server and the namespace as kubectl does: the
// file given, else $KUBECONFIG, else ~/.kube/config; the context given,
// else the current one; its namespace, else default.
func TestKubectlConfig(t *testing.T) {
	dir := t.TempDir()
	file := writeContexts(t, dir)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(writeContexts(t, t.TempDir()), filepath.Join(home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		name, kubeconfig, context string
		env                       map[string]string
		host, ns                  string
	}{
		{"the file, its current context", file, "", nil, "https://one.example:6443", "shop"},
		{"another context, no namespace", file, "b", nil, "https://two.example:6443", "default"},
		{"$KUBECONFIG", "", "", map[string]string{"KUBECONFIG": filepath.Join(dir, "missing") + string(os.PathListSeparator) + file}, "https://one.example:6443", "shop"},
		{"~/.kube/config", "", "b", map[string]string{"HOME": home}, "https://two.example:6443", "default"},
	} {
		cfg, ns, err := KubectlConfig(c.kubeconfig, c.context, env(c.env))
		if err != nil || cfg.Host != c.host || ns != c.ns {
			t.Errorf("%s: host %v, namespace %q, %v; want %s and %q", c.name, cfg, ns, err, c.host, c.ns)
		}
	}
	if _, _, err := KubectlConfig(file, "nope", nil); err == nil || !strings.Contains(err.Error(), `context "nope" (--context)`) {
		t.Errorf("an unknown context: %v", err)
	}
	if _, _, err := KubectlConfig(filepath.Join(dir, "missing"), "", nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing file: %v", err)
	}
	if _, _, err := KubectlConfig("", "", nil); !errors.Is(err, ErrNoKubeconfig) || strings.Contains(err.Error(), "KUBERNETES_MASTER") {
		t.Errorf("no kubeconfig, outside a Pod: %v; want ErrNoKubeconfig alone", err)
	}
}
