package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// runProbe is "sidecar probe [--address host:port] [--timeout d] <path>":
// an exec probe for images without curl, and a way to ask the sidecar from
// inside its container. It GETs path from a running sidecar, prints the
// answer's body alone on stdout (so `sidecar probe /leader | jq` works),
// and exits 0 on a 2xx answer; on any other answer it prints the status on
// stderr and exits 1, on no answer 1, on bad usage 2. Without --address
// the paths the ops listener serves (opsPaths) go to the ops listener if
// one is configured in the environment, every other path (/leader,
// /leader/watch, /) to the app listener. A signal ends the request at
// once.
func runProbe(ctx context.Context, p process, args []string) int {
	stdout, stderr := p.stdout, p.stderr
	fs := newFlagSet("sidecar probe")
	address := fs.String("address", "", "host:port of the sidecar listener to probe (default: the ops listener for "+
		strings.Join(opsPaths, ", ")+" when LEADER_SIDECAR_OPS_ADDRESS is set, else the app listener, LEADER_SIDECAR_HTTP_ADDRESS or 127.0.0.1:4040)")
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the answer")
	err := parseArgs(fs, args, "Usage: sidecar probe [flags] <path>, e.g. sidecar probe /leader/ready\n"+
		"Prints the body on stdout; exit 0 on a 2xx answer, 1 on another answer (its status on stderr) or none, 2 on bad usage.\n", stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "sidecar probe: %v\n", err)
		return 2
	case fs.NArg() != 1 || !strings.HasPrefix(fs.Arg(0), "/"):
		fmt.Fprintln(stderr, "sidecar probe: want exactly one path starting with /, e.g. /leader/ready")
		return 2
	case *timeout <= 0:
		fmt.Fprintf(stderr, "sidecar probe: --timeout: must be greater than 0, got %v\n", *timeout)
		return 2
	}
	path := fs.Arg(0)
	if *address == "" {
		*address = defaultProbeAddress(p.environ, path)
	}
	if err := checkAddress("--address", *address); err != nil {
		fmt.Fprintf(stderr, "sidecar probe: %v\n", err)
		return 2
	}
	ctx, cancel := requestContext(ctx, *timeout, p.signals)
	defer cancel()
	url := "http://" + dialable(*address) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "sidecar probe: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "sidecar probe: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	stdout.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sidecar probe: GET %s: reading the answer: %v\n", url, err)
		return 1
	}
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "sidecar probe: GET %s: %s\n", url, resp.Status)
		return 1
	}
	return 0
}

// maxProbeBody bounds what the probe reads of an answer: far more than
// any answer of the sidecar but a stream.
const maxProbeBody = 1 << 20

// opsPaths are the paths the ops listener serves (pkg/httpapi's
// NewOpsHandler); the app listener serves them too, and the rest of the
// app API.
var opsPaths = []string{"/healthz", "/readyz", "/leader/ready", "/metrics"}

// defaultProbeAddress is the listener that serves path: the ops listener
// for its paths when the environment configures one, else the app
// listener.
func defaultProbeAddress(environ []string, path string) string {
	if a, ok := lookup(environ, envName("ops-address")); ok && a != "" && slices.Contains(opsPaths, path) {
		return a
	}
	return defaultAppAddress(environ)
}

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

// runHandoff is "sidecar handoff": it calls POST /leader/handoff on a
// running sidecar and reports the answer. A signal ends the request at
// once.
func runHandoff(ctx context.Context, p process, args []string) int {
	fs := newFlagSet("sidecar handoff")
	to := fs.String("to", "", "the candidate to hand off to: its Pod name or its identity; empty: any standby")
	address := fs.String("address", defaultAppAddress(p.environ), "host:port of the sidecar's app listener")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the answer")
	err := parseArgs(fs, args, handoffUsage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(p.stderr, "sidecar handoff: %v\n", err)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(p.stderr, "sidecar handoff: unexpected argument %q: name the target with --to\n", fs.Arg(0))
		return 2
	case *timeout <= 0:
		fmt.Fprintf(p.stderr, "sidecar handoff: --timeout: must be greater than 0, got %v\n", *timeout)
		return 2
	}
	if err := checkAddress("--address", *address); err != nil {
		fmt.Fprintf(p.stderr, "sidecar handoff: %v\n", err)
		return 2
	}
	ctx, cancel := requestContext(ctx, *timeout, p.signals)
	defer cancel()
	st, err := postHandoff(ctx, "http://"+dialable(*address)+"/leader/handoff", *to)
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar handoff: %v\n", err)
		return 1
	}
	fmt.Fprintf(p.stdout, "handed off: %s leads now\n", st.Holder)
	return 0
}

// postHandoff sends the hand-off request and returns the sidecar's state
// after a hand-off, or an error carrying the sidecar's reason.
func postHandoff(ctx context.Context, url, to string) (fence.LeaderJSON, error) {
	var body io.Reader
	if to != "" {
		b, err := json.Marshal(map[string]string{"to": to})
		if err != nil {
			return fence.LeaderJSON{}, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return fence.LeaderJSON{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fence.LeaderJSON{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fence.LeaderJSON{}, fmt.Errorf("reading the answer (%s): %w", resp.Status, err)
	}
	var st fence.LeaderJSON
	if err := json.Unmarshal(data, &st); err != nil {
		return fence.LeaderJSON{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: %s", resp.Status, st.Error)
	}
	return st, nil
}

// defaultAppAddress is the app listener's address from the environment
// the sidecar itself reads, else its default.
func defaultAppAddress(environ []string) string {
	if a, ok := lookup(environ, envName("http-address")); ok && a != "" {
		return a
	}
	return "127.0.0.1:4040"
}
