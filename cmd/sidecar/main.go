// Command sidecar runs next to an application container, takes part in a
// leader election with its peers, and tells the application over a
// loopback HTTP API whether it leads and which fencing token to use.
//
// The command line is a small tree: "sidecar [flags]" runs the sidecar,
// "sidecar probe" asks a running one (see runProbe), "sidecar handoff"
// asks a running leader to hand leadership over (see runHandoff),
// "sidecar lock" runs a command while leading (see runLock); on Linux the
// lock starts the binary again as its command's guardian
// (supervise.GuardianArg, not listed in --help; see package supervise). "sidecar check" checks the
// sidecar's flags and environment on the sidecar's own path and prints the
// result (see runCheck). "sidecar reset" clears an SQLite election's
// record (see runReset). "sidecar status" shows every election (see
// runStatus); installed as kubectl-leader, the binary is the kubectl
// plugin "kubectl leader" and takes status alone (see plugin.go).
//
// Every command goes one way: its flags are bound straight into one config
// value, a struct per concern with each flag's default, help and check
// side by side; LEADER_SIDECAR_* variables fill the flags not given; the
// value checks itself, the parts are built from it, then the lifecycle
// runs. The sidecar and sidecar lock share the election's settings
// (electionConfig) and check them alike. A command is in a file of its
// own: the sidecar in sidecar.go (its settings) and serve.go (its parts
// and lifecycle), lock.go, check.go, reset.go, status.go (its stores;
// what it shows is package statusview), probe.go, handoff.go (and
// client.go, what those two share), version.go; help, which prints the
// others' usage, is here.
//
// Exit status of the sidecar: 0 after a clean shutdown (or --help,
// --version); 2 for an invalid flag or environment variable; 1 when the
// sidecar cannot start (store or listener), its store is lost, or a second
// signal cuts the shutdown short. SIGTERM, SIGINT and SIGHUP all stop it;
// the same signal again within repeatWindow (GNU timeout signals the
// process and then its process group) is not a second signal.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/leader-sidecar/leader-sidecar/pkg/supervise"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == supervise.GuardianArg {
		// Before any signal handling: the guardian sets up its own.
		os.Exit(supervise.RunGuardian(os.Args[2:]))
	}
	p := process{environ: os.Environ(), stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, signals: notifyStopSignals()}
	if isPlugin(os.Args[0]) {
		os.Exit(executePlugin(context.Background(), p, os.Args[1:]))
	}
	os.Exit(execute(context.Background(), p, os.Args[1:]))
}

// process is what a command gets from the operating system.
type process struct {
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
	// signals delivers SIGTERM, SIGINT and SIGHUP as they arrive, a repeat
	// within repeatWindow dropped (see notifyStopSignals); nil when nobody
	// sends any (tests). Each command decides what a signal means.
	signals <-chan os.Signal
}

// command is a word that may come first on the command line, before any
// flag; without one, sidecar runs the sidecar itself (runSidecar).
type command struct {
	name  string
	usage string // after "sidecar <name> "
	about string
	run   func(ctx context.Context, p process, args []string) int
}

// commands is the one list: execute dispatches on it, --help prints it
// and an unexpected argument names it. "help" is --help and is listed
// apart.
var commands = []command{
	{"probe", "[--address host:port] [--timeout d] <path>",
		"GET <path> from a running sidecar and print the body; exit 0 on a 2xx answer, 1 otherwise (an exec probe for images without curl)", runProbe},
	{"handoff", "[--to <Pod name or identity>] [--address host:port] [--timeout d]",
		"ask the running sidecar, the leader, to hand leadership to that candidate (or any standby) with the next token; exit 0 once it did, 1 with the reason otherwise", runHandoff},
	{"reset", "--sqlite-path <file> [--lease-name <name>]",
		"write an SQLite election's record back released, its token kept, once no holder renews it (the file refuses deletes); exit 0 once done, 1 if a holder renewed it", runReset},
	{"check", "[flags]",
		"check the sidecar's flags and LEADER_SIDECAR_* variables as the sidecar would, without starting it; print the resolved configuration and exit 0, or the sidecar's error and exit 2", runCheck},
	{"status", "[-n <namespace> | -A] [-o wide|json] [--watch] [--backend sqlite --sqlite-path <file>]",
		"show every election in a namespace: holder, token, term, last renewal, lease, hand-off, stale or not; also the kubectl plugin kubectl-leader (kubectl leader status)",
		func(ctx context.Context, p process, args []string) int {
			return runStatus(ctx, p, args, "sidecar status")
		}},
	{"lock", "[flags] -- CMD [ARGS...]",
		"join the election, run CMD while leading (with its token in LEADER_SIDECAR_TOKEN), stop it if leadership is lost, release when it exits; exit with its status", runLock},
	{"version", "", "print the version and exit (as --version)", runVersion},
}

// execute runs the command args name, or the sidecar, and returns the
// exit status.
func execute(ctx context.Context, p process, args []string) int {
	if len(args) > 0 {
		for _, c := range commands {
			if c.name == args[0] {
				return c.run(ctx, p, args[1:])
			}
		}
		if args[0] == "help" {
			return runHelp(ctx, p, args[1:])
		}
	}
	return runSidecar(ctx, p, args)
}

// runHelp is "sidecar help [command]": the command's --help, or without
// one the sidecar's.
func runHelp(ctx context.Context, p process, args []string) int {
	switch {
	case len(args) == 0:
		return runSidecar(ctx, p, []string{"--help"})
	case len(args) > 1:
		fmt.Fprintf(p.stderr, "sidecar help: unexpected argument %q: help takes one command\n", args[1])
		return 2
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, p, []string{"--help"})
		}
	}
	fmt.Fprintf(p.stderr, "sidecar help: unknown command %q: the commands are %s\n", args[0], strings.Join(commandNames(), ", "))
	return 2
}

// run is execute for callers that send no signals and no input: ctx
// ending is the shutdown signal.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	return execute(ctx, process{environ: environ, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr}, args)
}

func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	return append(names, "help")
}

// rootUsage is what sidecar --help prints above the sidecar's flags.
func rootUsage() string {
	var b strings.Builder
	b.WriteString("Usage: sidecar [flags]\n       sidecar <command> [arguments]\n\n")
	b.WriteString("Elects one leader among replicas and tells the app over HTTP.\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  sidecar %s %s\n      %s\n", c.name, c.usage, c.about)
	}
	b.WriteString("  sidecar help [command]\n      this text (also --help), or the command's (as sidecar <command> --help)\n")
	b.WriteString("\nEach command has its own --help.\n")
	return b.String()
}
