package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

func TestHelpAndVersionExit0(t *testing.T) {
	code, stdout, _ := runArgs(t, []string{"--help"})
	if code != 0 || !strings.Contains(stdout, "--lease-duration") || !strings.Contains(stdout, "LEADER_SIDECAR_LEASE_DURATION") {
		t.Fatalf("--help: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runArgs(t, []string{"--version"})
	if code != 0 || !strings.HasPrefix(stdout, "sidecar ") {
		t.Fatalf("--version: exit %d, stdout %q", code, stdout)
	}
}

func TestHelpListsTheSubcommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := runArgs(t, args)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		_, commands, found := strings.Cut(stdout, "\nCommands:\n")
		if !found {
			t.Fatalf("%v: no Commands section in %q", args, stdout)
		}
		commands, _, _ = strings.Cut(commands, "\n\n")
		for _, name := range commandNames() {
			if !strings.Contains(commands+"\n", "  sidecar "+name+" ") && !strings.Contains(commands+"\n", "  sidecar "+name+"\n") {
				t.Fatalf("%v: %q is not listed under Commands:\n%s", args, name, commands)
			}
		}
		if !strings.Contains(commands, "sidecar probe") {
			t.Fatalf("%v: probe is not listed:\n%s", args, commands)
		}
	}
}

// A word that is no subcommand names the ones there are.
func TestUnknownSubcommandNamesTheSubcommands(t *testing.T) {
	code, _, stderr := runArgs(t, []string{"prob"})
	if code != 2 || !strings.Contains(stderr, `unexpected argument "prob"`) || !strings.Contains(stderr, "probe") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stderr, "flags only") {
		t.Fatalf("the message denies the subcommands: %q", stderr)
	}
}

// TestBinaryLinksOnlyTheAPIGroupsItUses lists the packages the sidecar
// binary is built from: of k8s.io/api only the three groups it sends, no
// client-go clientset (which registers every group at start-up), no
// generic typed clients (whose fakes bring client-go's testing package,
// managed fields and the OpenAPI models, all initialised at start-up: a
// megabyte of resident memory per replica), and none of the test and
// benchmark tools.
func TestBinaryLinksOnlyTheAPIGroupsItUses(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var apis []string
	for _, pkg := range strings.Fields(string(out)) {
		if group, ok := strings.CutPrefix(pkg, "k8s.io/api/"); ok {
			apis = append(apis, group)
		}
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/tools/events",
			"k8s.io/client-go/gentype", "k8s.io/client-go/testing", "k8s.io/apimachinery/pkg/util/managedfields", "github.com/google/gnostic-models",
			"sigs.k8s.io/controller-runtime", "gonum.org/", "github.com/leader-sidecar/leader-sidecar/internal/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the sidecar links %s", pkg)
			}
		}
	}
	slices.Sort(apis)
	if want := []string{"coordination/v1", "core/v1", "events/v1"}; !slices.Equal(apis, want) {
		t.Errorf("API groups linked: %v, want %v", apis, want)
	}
}

// sidecar version prints what --version prints, as kubectl version does;
// sidecar help <command> prints that command's usage, as its --help.
func TestVersionAndHelpCommands(t *testing.T) {
	code, want, _ := runArgs(t, []string{"--version"})
	if got, gotOut, stderr := runArgs(t, []string{"version"}); got != 0 || gotOut != want || stderr != "" {
		t.Errorf("sidecar version: exit %d, stdout %q, stderr %q; want 0 and %q (exit %d), as --version", got, gotOut, stderr, want, code)
	}
	if got, _, stderr := runArgs(t, []string{"version", "--short"}); got != 2 || !strings.Contains(stderr, "--short") {
		t.Errorf("sidecar version --short: exit %d, stderr %q; want 2 naming the argument", got, stderr)
	}
	for _, c := range commands {
		_, usage, _ := runArgs(t, []string{c.name, "--help"})
		code, stdout, stderr := runArgs(t, []string{"help", c.name})
		if code != 0 || stdout != usage || stderr != "" {
			t.Errorf("sidecar help %s: exit %d, stderr %q, stdout:\n%s\nwant 0 and what sidecar %s --help prints:\n%s", c.name, code, stderr, stdout, c.name, usage)
		}
	}
	code, _, stderr := runArgs(t, []string{"help", "lok"})
	if code != 2 || !strings.Contains(stderr, `"lok"`) || !strings.Contains(stderr, "lock") {
		t.Errorf("sidecar help lok: exit %d, stderr %q; want 2 naming the word and the commands", code, stderr)
	}
}

// TestVersionOfAPlainGoBuild: a binary built without -X main.version
// names the module's version, else the commit go build recorded.
func TestVersionOfAPlainGoBuild(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		module   string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", vcs("f8f82d1aaaabbbbccccddddeeeeffff000011112", "false"), "v1.2.3"},
		{"(devel)", vcs("f8f82d1aaaabbbbccccddddeeeeffff000011112", "false"), "devel (f8f82d1aaaab)"},
		{"(devel)", vcs("f8f82d1aaaabbbbccccddddeeeeffff000011112", "true"), "devel (f8f82d1aaaab-dirty)"},
		{"(devel)", nil, "devel"},
		{"", nil, "devel"},
	} {
		if got := versionOf(c.module, c.settings); got != c.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", c.module, c.settings, got, c.want)
		}
	}
}
