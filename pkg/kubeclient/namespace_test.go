package kubeclient

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
