package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update makes the tests of generated files (the configuration page's flag
// table, the charts' schemas) rewrite them instead of comparing.
var update = flag.Bool("update", false, "rewrite the generated files instead of comparing them")

// runArgs runs the command line args with environ, as main does but with
// no signals and no input, its context already cancelled: a run that gets
// past validation stops at once.
func runArgs(t *testing.T, args []string, environ ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a run that gets past validation stops at once
	code = run(ctx, args, environ, &out, &errOut)
	return code, out.String(), errOut.String()
}

// sidecarConfigOf parses and checks args and environ as the sidecar does.
func sidecarConfigOf(t *testing.T, args, environ []string) sidecarConfig {
	t.Helper()
	cfg, err := parseSidecarConfig(args, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// parseSidecarConfig is sidecarConfigOf's parse and check, its error
// returned.
func parseSidecarConfig(args, environ []string) (sidecarConfig, error) {
	c := newSidecarConfig()
	if err := c.set.Parse(args); err != nil {
		return sidecarConfig{}, err
	}
	if err := applyEnv(c.set, environ); err != nil {
		return sidecarConfig{}, err
	}
	if err := c.check(environ); err != nil {
		return sidecarConfig{}, err
	}
	return *c, nil
}

// kubeconfigFor writes a kubeconfig whose one context points at server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
