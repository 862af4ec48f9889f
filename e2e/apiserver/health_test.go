package apiserver

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// healthFor is how long TestHealthWithDefaultTimings probes: four times
// the 15s lease, and four times the longest a healthy loop may hold one
// attempt or snapshot at these timings (the renew deadline plus two
// jittered retry periods, 14.8s), so an idle standby's health is judged
// long after the last attempt it made.
const healthFor = 60 * time.Second

// healthArgs are the sidecar's default timings, given over the short test
// timings, and an ops listener.
var healthArgs = []string{"--lease-duration", "15s", "--renew-deadline", "10s", "--retry-period", "2s",
	"--ops-address", "127.0.0.1:0"}

// TestHealthWithDefaultTimings runs a leader and two standbys with the
// default timings on each backend and asks GET /healthz and GET /readyz
// on the app and the ops listener of each every 500ms for healthFor:
// every answer must be 200 (a quiet standby is healthy and ready).
func TestHealthWithDefaultTimings(t *testing.T) {
	t.Parallel()
	backends := map[string]func(t *testing.T) func(pod string) *sidecartest.Sidecar{
		"lease": func(t *testing.T) func(string) *sidecartest.Sidecar {
			k := sidecartest.Kube(t)
			ns, kc := k.Namespace(t), k.Kubeconfig(t, "")
			return func(pod string) *sidecartest.Sidecar {
				return sidecartest.LeaseSidecar(t, kc, ns, "health", pod, healthArgs...)
			}
		},
		"sqlite": func(t *testing.T) func(string) *sidecartest.Sidecar {
			db := sidecartest.DBPath(t)
			return func(string) *sidecartest.Sidecar { return sidecartest.Start(t, db, healthArgs...) }
		},
	}
	for name, election := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			newSidecar := election(t)
			var all []*sidecartest.Sidecar
			for i := range 3 {
				all = append(all, newSidecar(fmt.Sprintf("app-%d", i)))
			}
			sidecartest.AwaitLeader(t, all, 20*time.Second)
			awaitReady(t, all, 20*time.Second)
			probeHealth(t, all)
			if ls, _ := sidecartest.Leaders(t, all); len(ls) != 1 {
				t.Fatalf("%d leaders after probing, want one", len(ls))
			}
			sidecartest.AllAlive(t, all)
		})
	}
}

// awaitReady waits until /readyz answers 200 on every sidecar: each has
// reached the store once (until then 503 is the right answer, as for a
// readiness probe during start-up).
func awaitReady(t *testing.T, all []*sidecartest.Sidecar, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, s := range all {
		for {
			resp, err := sidecartest.Client.Get("http://" + s.Addr() + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready within %v (%v)", s.Addr(), within, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// probeHealth asks every probe of every sidecar every 500ms for healthFor
// and fails t on any answer but 200.
func probeHealth(t *testing.T, all []*sidecartest.Sidecar) {
	t.Helper()
	var urls []string
	for _, s := range all {
		for _, addr := range []string{s.Addr(), s.Listener("ops")} {
			urls = append(urls, "http://"+addr+"/healthz", "http://"+addr+"/readyz")
		}
	}
	asked, begin := 0, time.Now()
	for time.Since(begin) < healthFor {
		for _, u := range urls {
			resp, err := sidecartest.Client.Get(u)
			if err != nil {
				t.Fatalf("GET %s %v into the run: %v", u, time.Since(begin).Round(time.Second), err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s answered %d %v into the run (after %d answers of 200)",
					u, resp.StatusCode, time.Since(begin).Round(time.Second), asked)
			}
			asked++
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d answers, all 200: /healthz and /readyz on the app and ops listeners of %d sidecars every 500ms for %v",
		asked, len(all), healthFor)
}
