package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

func TestPodReadinessModesNeedThePod(t *testing.T) {
	code, _, stderr := runArgs(t, []string{"--readiness-mode", "label", "--sqlite-path", t.TempDir() + "/x.db",
		"--kubeconfig", kubeconfigFor(t, "https://127.0.0.1:1")}, "POD_NAME=app-0", "POD_NAMESPACE=default")
	if code != 1 || !strings.Contains(stderr, "--readiness-mode label") || !strings.Contains(stderr, "POD_UID") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// --readiness-mode takes every mode of podreadiness.Modes, named in its
// help, and the sidecar builds a Pod publisher (which needs the
// Kubernetes API) exactly for the modes that PublishesOnPod.
func TestReadinessModesAreThePublishersModes(t *testing.T) {
	help := newSidecarConfig().set.Lookup("readiness-mode").Usage
	// noAPI's clients cannot be made: its kubeconfig does not exist.
	noAPI := kubeclient.NewClients(kubeclient.ResolveSource(filepath.Join(t.TempDir(), "missing"), nil), kubeclient.Options{})
	for _, mode := range podreadiness.Modes {
		if !strings.Contains(help, string(mode)) {
			t.Errorf("the help of --readiness-mode does not name %q: %q", mode, help)
		}
		cfg := sidecarConfigOf(t, []string{"--readiness-mode", string(mode)}, nil)
		p, err := podPublisher(cfg, noAPI, slog.New(slog.DiscardHandler))
		if p != nil || (err != nil) != mode.PublishesOnPod() {
			t.Errorf("mode %q: publisher %v, error %v; PublishesOnPod is %v", mode, p, err, mode.PublishesOnPod())
		}
	}
}

// The leader's deletion cost is kept with the lease backend in a Pod
// whose name, namespace and UID are known, unless --pod-deletion-cost=false.
func TestDeletionCostOnlyOnLeasesInAPod(t *testing.T) {
	pod := []string{"POD_NAME=app-0", "POD_NAMESPACE=default", "POD_UID=u-1"}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want bool
	}{
		{"lease, in a Pod", []string{"--backend", "lease"}, pod, true},
		{"turned off", []string{"--backend", "lease", "--pod-deletion-cost=false"}, pod, false},
		{"sqlite", []string{"--backend", "sqlite"}, pod, false},
		{"no POD_UID", []string{"--backend", "lease"}, pod[:2], false},
	} {
		cfg := sidecarConfigOf(t, c.args, c.env)
		if got := deletionCostOn(cfg, slog.New(slog.DiscardHandler)); got != c.want {
			t.Errorf("%s: deletion cost %v, want %v", c.name, got, c.want)
		}
	}
}

// The Pod's revision is its pod-template-hash (a Deployment's Pod), else
// its controller-revision-hash (a StatefulSet's), else none; the elector
// gets it and hands off on stop exactly when it releases on stop.
func TestRevisionFromTheDownwardAPI(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"POD_TEMPLATE_HASH=7d9f5c8b4", "POD_CONTROLLER_REVISION_HASH=web-6b7c9d"}, "7d9f5c8b4"},
		{[]string{"POD_TEMPLATE_HASH=", "POD_CONTROLLER_REVISION_HASH=web-6b7c9d"}, "web-6b7c9d"},
		{nil, ""},
	} {
		if got := podFromEnv(c.env).revision; got != c.want {
			t.Errorf("%q: revision %q, want %q", c.env, got, c.want)
		}
	}
}

// TestPortInUseNamesTheFlag: a listener whose port is taken stops the
// sidecar before it joins the election, with an error that names the flag
// that set the address, for each listener.
func TestPortInUseNamesTheFlag(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, flag := range []string{"--http-address", "--ops-address"} {
		db := filepath.Join(t.TempDir(), "leader.db")
		// Not cancelled at once, as runArgs does: the listeners are bound
		// once the store is open. A sidecar that binds runs until then.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		var errOut bytes.Buffer
		code := run(ctx, []string{"--sqlite-path", db, "--http-address", "127.0.0.1:0", "--ops-address", "127.0.0.1:0",
			flag, taken.Addr().String()}, nil, io.Discard, &errOut)
		cancel()
		stderr := errOut.String()
		if code != 1 || !strings.Contains(stderr, flag+": the ") || !strings.Contains(stderr, "address already in use") {
			t.Errorf("%s on a port in use: exit %d, stderr %q; want 1 naming %s", flag, code, stderr, flag)
		}
	}
}

// TestSQLiteOpenErrorNamesTheFile: an open that fails (here, cancelled at
// once) names the file the operator gave, then the election.
func TestSQLiteOpenErrorNamesTheFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "leader.db")
	code, _, stderr := runArgs(t, []string{"--sqlite-path", db, "--lease-name", "billing"})
	if code != 1 || !strings.Contains(stderr, `sqlite: open `+db+` (election \"billing\")`) {
		t.Fatalf("exit %d, stderr %q; want 1 naming the file %s, then the election", code, stderr, db)
	}
}
