package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
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
