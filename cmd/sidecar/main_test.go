package main

import (
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
