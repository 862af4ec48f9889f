package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

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
