package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// runProbe is "sidecar probe [--address host:port] [--timeout d] <path>":
// an exec probe for images without curl. It GETs path from a running
// sidecar and exits 0 on a 2xx answer, 1 on any other answer or no answer,
// 2 on bad usage. The default address is the ops listener if one is
// configured in the environment, else the app listener. A signal ends the
// request at once.
func runProbe(ctx context.Context, p process, args []string) int {
	stdout, stderr := p.stdout, p.stderr
	fs := newFlagSet("sidecar probe")
	address := fs.String("address", defaultProbeAddress(p.environ), "host:port of the sidecar listener to probe")
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the answer")
	err := parseArgs(fs, args, "Usage: sidecar probe [flags] <path>, e.g. sidecar probe /leader/ready\n", stdout)
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
	if err := checkAddress("--address", *address); err != nil {
		fmt.Fprintf(stderr, "sidecar probe: %v\n", err)
		return 2
	}
	ctx, cancel := requestContext(ctx, *timeout, p.signals)
	defer cancel()
	url := "http://" + dialable(*address) + fs.Arg(0)
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
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	fmt.Fprintf(stdout, "%s %s\n", resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}

func defaultProbeAddress(environ []string) string {
	if a, ok := lookup(environ, envName("ops-address")); ok && a != "" {
		return a
	}
	return defaultAppAddress(environ)
}

// requestContext bounds the request of a client command (probe, handoff)
// by timeout, and ends it early on a signal (signals may be nil).
func requestContext(ctx context.Context, timeout time.Duration, signals <-chan os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	go func() {
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
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
