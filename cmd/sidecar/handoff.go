package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

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
