// Command sidecar runs next to an application container, takes part in a
// leader election with its peers, and tells the application over a
// loopback HTTP API whether it leads and which fencing token to use.
//
// The command line is a small tree: "sidecar [flags]" runs the sidecar,
// "sidecar probe" asks a running one (see runProbe), "sidecar handoff"
// asks a running leader to hand leadership over (see runHandoff),
// "sidecar lock" runs a command while leading (see runLock); on Linux the
// lock starts the binary again as its command's guardian (guardianArg, not
// listed in --help; see guardian_linux.go). "sidecar check" checks the
// sidecar's flags and environment on the sidecar's own path and prints the
// result (see runCheck). Every command goes one way: flags
// and LEADER_SIDECAR_* variables are parsed and checked into one config
// value, the parts are built from it, then the lifecycle runs. The sidecar
// and sidecar lock share the flags of the election and check them alike.
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
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == guardianArg {
		// Before any signal handling: the guardian sets up its own.
		os.Exit(runGuardian(os.Args[2:]))
	}
	p := process{environ: os.Environ(), stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, signals: notifyStopSignals()}
	os.Exit(execute(context.Background(), p, os.Args[1:]))
}
