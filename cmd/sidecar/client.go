// What the client commands (probe, handoff) share: how a request is bounded
// and where it goes.

package main

import (
	"context"
	"net"
	"os"
	"time"
)

// requestContext bounds the request of a client command (probe, handoff)
// by timeout, and ends it early on a signal (signals may be nil).
func requestContext(ctx context.Context, timeout time.Duration, signals <-chan os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	ctx, cancel := cancelOnSignal(ctx, signals)
	return ctx, func() { cancel(); cancelTimeout() }
}

// dialable turns a listen address such as ":8081" or "0.0.0.0:8081" into
// one to connect to on this host.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

const handoffUsage = `Usage: sidecar handoff [--to <Pod name or identity>] [--address host:port] [--timeout d]

Asks the sidecar running at --address, the leader, to hand leadership to
the candidate --to names (its Pod name, or its full identity), or without
--to to any standby that answers, with the next fencing token
(POST /leader/handoff). Run it in the leader's sidecar container before
maintenance: kubectl exec <pod> -c leader-sidecar -- /sidecar handoff.

Exit status: 0 once another candidate holds the lease; 1 if the hand-off
did not happen (this replica is not the leader, no candidate took it, the
sidecar could not be reached) with the sidecar's reason; 2 for bad usage.
`
