package main

import (
	"strings"
	"testing"
)

// --version and --help answer before any validation: a misconfigured Pod
// is exactly where someone runs kubectl exec ... /sidecar --version.
func TestVersionAnswersBeforeValidation(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
	}{
		{"no configuration", []string{"--version"}, nil},
		{"env: unknown backend", []string{"--version"}, []string{"LEADER_SIDECAR_BACKEND=etcd"}},
		{"env: duration that does not parse", []string{"--version"}, []string{"LEADER_SIDECAR_LEASE_DURATION=abc"}},
		{"env: timings that break the rule", []string{"--version"}, []string{"LEADER_SIDECAR_LEASE_DURATION=5s"}},
		{"flag: unknown backend before", []string{"--backend", "etcd", "--version"}, nil},
		{"flag: unknown backend after", []string{"--version", "--backend=etcd"}, nil},
		{"flag: remote app API", []string{"--http-address", "0.0.0.0:4040", "--version"}, nil},
		{"env: version asked by env", nil, []string{"LEADER_SIDECAR_VERSION=true", "LEADER_SIDECAR_BACKEND=etcd"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, c.args, c.env...)
			if code != 0 || !strings.HasPrefix(stdout, "sidecar ") || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the version", code, stdout, stderr)
			}
		})
	}
}

func TestHelpAnswersBeforeValidation(t *testing.T) {
	for _, env := range [][]string{
		{"LEADER_SIDECAR_BACKEND=etcd"},
		{"LEADER_SIDECAR_LEASE_DURATION=abc"},
	} {
		code, stdout, stderr := runArgs(t, []string{"--help"}, env...)
		if code != 0 || !strings.Contains(stdout, "--lease-duration") || stderr != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", env, code, stdout, stderr)
		}
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
