package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// subcommand is a word that may come first on the command line, before
// any flag; without one, sidecar runs the sidecar itself.
type subcommand struct {
	name  string
	usage string // after "sidecar <name> "
	about string
	run   func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int
}

// subcommands is the one list: run dispatches on it, --help prints it and
// an unexpected argument names it. "help" is --help and is listed apart.
var subcommands = []subcommand{
	{"probe", "[--address host:port] [--timeout d] <path>",
		"GET <path> from a running sidecar; exit 0 on a 2xx answer, 1 otherwise (an exec probe for images without curl)", runProbe},
}

func subcommandNames() []string {
	names := make([]string, 0, len(subcommands)+1)
	for _, s := range subcommands {
		names = append(names, s.name)
	}
	return append(names, "help")
}

func findSubcommand(name string) (subcommand, bool) {
	for _, s := range subcommands {
		if s.name == name {
			return s, true
		}
	}
	return subcommand{}, false
}

// usageText is what --help prints above the flags.
func usageText() string {
	var b strings.Builder
	b.WriteString("Usage: sidecar [flags]\n       sidecar <command> [arguments]\n\n")
	b.WriteString("Elects one leader among replicas and tells the app over HTTP.\n\nCommands:\n")
	for _, s := range subcommands {
		fmt.Fprintf(&b, "  sidecar %s %s\n      %s\n", s.name, s.usage, s.about)
	}
	b.WriteString("  sidecar help\n      this text (also --help)\n")
	b.WriteString("\nEach command has its own --help.\n")
	return b.String()
}
