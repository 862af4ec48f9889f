package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfigFor writes a kubeconfig whose one context points at server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The lease backend finds its API server as kubectl does: --kubeconfig,
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
			cfg, err := resolveKubeconfig(c.flag, c.env).restConfig()
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

// The sidecar started with $KUBECONFIG and no --kubeconfig uses the file:
// it gets past loading the configuration and fails on the namespace
// instead (POD_NAMESPACE is not a namespace name).
func TestLeaseBackendReadsKUBECONFIG(t *testing.T) {
	kc := kubeconfigFor(t, "https://127.0.0.1:1")
	code, _, stderr := runArgs(t, []string{"--backend", "lease"}, "KUBECONFIG="+kc, "POD_NAMESPACE=Not_Valid")
	if code != 1 || !strings.Contains(stderr, "from POD_NAMESPACE is not a valid namespace name") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
