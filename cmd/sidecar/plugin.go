package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// pluginName is the name under which the binary is the kubectl plugin
// "kubectl leader": kubectl runs kubectl-leader, found on PATH, for
// "kubectl leader ...", with the words after "leader" as its arguments.
const pluginName = "kubectl-leader"

// isPlugin reports whether argv0, the name the binary was started as, is
// the plugin's (a symlink or a copy named kubectl-leader).
func isPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginName
}

const pluginUsage = `Usage: kubectl leader status [flags]

The elections of leader-sidecar (and of client-go's leaderelection) in a
namespace. Commands:
  kubectl leader status [-n <namespace> | -A] [-o wide|json] [--watch]
      every election: holder, token, term, last renewal, lease, hand-off,
      stale or not (kubectl leader status --help)
`

// executePlugin runs "kubectl leader <args>": the first argument is the
// command, and status is the one there is (the sidecar itself and its
// other commands run in Pods, not from kubectl). It returns the exit
// status.
func executePlugin(ctx context.Context, p process, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(p.stderr, pluginUsage)
		return 2
	}
	switch args[0] {
	case "status":
		return runStatus(ctx, p, args[1:], "kubectl leader status")
	case "help", "--help", "-h":
		fmt.Fprint(p.stdout, pluginUsage)
		return 0
	case "--version", "version":
		return printVersion(p)
	}
	fmt.Fprintf(p.stderr, "kubectl leader: unknown command %q: the command is status (kubectl leader status --help)\n", args[0])
	return 2
}
