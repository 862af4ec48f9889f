package lease

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveNamespace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saFile := write("namespace", "team-a\n")
	emptyFile := write("empty", " \n")
	badFile := write("bad", "Team_A")
	missing := filepath.Join(dir, "missing")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "POD_NAMESPACE" {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		name, flag string
		getenv     func(string) string
		file       string
		want       string
		wantErr    []string
	}{
		{name: "flag wins", flag: "from-flag", getenv: env("from-env"), file: saFile, want: "from-flag"},
		{name: "env next", getenv: env("from-env"), file: saFile, want: "from-env"},
		{name: "file last", getenv: env(""), file: saFile, want: "team-a"},
		{name: "nil getenv", file: saFile, want: "team-a"},
		{name: "nothing", getenv: env(""), file: missing, wantErr: []string{"--namespace", "POD_NAMESPACE", missing, "does not exist"}},
		{name: "empty file", getenv: env(""), file: emptyFile, wantErr: []string{"--namespace", "POD_NAMESPACE", "is empty"}},
		{name: "file is a directory", getenv: env(""), file: dir, wantErr: []string{"--namespace", "POD_NAMESPACE", dir}},
		{name: "bad flag", flag: "Team_A", wantErr: []string{`"Team_A" from --namespace`}},
		{name: "bad env", getenv: env("a.b"), wantErr: []string{`"a.b" from POD_NAMESPACE`}},
		{name: "bad file", getenv: env(""), file: badFile, wantErr: []string{`"Team_A" from ` + badFile}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveNamespace(c.flag, c.getenv, c.file)
			if c.wantErr == nil {
				if err != nil || got != c.want {
					t.Fatalf("got %q, %v; want %q", got, err, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %q, want an error", got)
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestResolveNamespaceDefaultFile(t *testing.T) {
	got, err := ResolveNamespace("", func(string) string { return "" }, "")
	if _, statErr := os.Stat(ServiceAccountNamespaceFile); statErr == nil {
		t.Skipf("running in a Pod (%s exists): got %q, %v", ServiceAccountNamespaceFile, got, err)
	}
	if err == nil || !strings.Contains(err.Error(), ServiceAccountNamespaceFile) {
		t.Fatalf("got %q, %v; want an error naming %s", got, err, ServiceAccountNamespaceFile)
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
