// Command sidecar runs next to an application container, takes part in a
// leader election with its peers, and tells the application over a
// loopback HTTP API whether it leads and which fencing token to use.
//
// Exit status: 0 after a clean shutdown (or --help, --version); 2 for an
// invalid flag or environment variable; 1 when the sidecar cannot start
// (store or listener) or a second signal cuts the shutdown short.
//
// "sidecar probe <path>" asks a running sidecar instead (see runProbe).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel() // first signal: stop claiming, release, shut down
		sig := <-signals
		fmt.Fprintf(os.Stderr, "sidecar: second signal (%v): exiting at once\n", sig)
		os.Exit(1)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
