package kubeevents

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leader-sidecar/leader-sidecar/internal/kubetest"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// countingClient is a kubeclient.Client for the test API server, acting as
// user (admin when ""), that counts the Events it posts.
func countingClient(t *testing.T, user string, posts *atomic.Int64) *kubeclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
				posts.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := env.Namespace(t.Context(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestEventsAboutThePodRelatedToTheLease records a term and a token
// anomaly, and finds the Events in the API server as soon as Stop
// returns, with the fields client-go's events recorder sets.
func TestEventsAboutThePodRelatedToTheLease(t *testing.T) {
	ns := namespace(t)
	var posts atomic.Int64
	r, err := New(Config{Client: countingClient(t, "", &posts), Pod: Pod{Name: "worker-7", UID: "u-1"},
		LeaseNamespace: ns, LeaseName: "billing", Identity: "worker-7_abc"})
	if err != nil {
		t.Fatal(err)
	}
	r.LeadershipChanged(true, 3)
	r.LeadershipChanged(false, 3)
	r.TokenAnomaly(election.TokenRegressed, 1, 3)
	r.LeaseDurationBounded("x", math.MaxInt32*time.Second, 150*time.Second)
	r.Stop()

	list, err := env.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ kind, note string }{
		"BecameLeader":       {corev1.EventTypeNormal, "worker-7_abc became leader of Lease " + ns + "/billing with fencing token 3"},
		"StoppedLeading":     {corev1.EventTypeNormal, "worker-7_abc stopped leading Lease " + ns + "/billing (token 3)"},
		"token-regressed":    {corev1.EventTypeWarning, "worker-7_abc found token 1 in Lease " + ns + "/billing, highest seen 3: token-regressed"},
		"RecordLeaseBounded": {corev1.EventTypeWarning, "worker-7_abc found Lease " + ns + "/billing declaring a lease duration of 596523h14m7s (holder \"x\"), longer than it trusts: waited out as 2m30s"},
	}
	for _, ev := range list.Items {
		w, ok := want[ev.Action]
		if !ok {
			t.Fatalf("unexpected Event %s", ev.Action)
		}
		checkEvent(t, &ev, ns, w.kind, w.note)
		delete(want, ev.Action)
	}
	if len(want) > 0 || posts.Load() != 4 {
		t.Fatalf("Events missing after Stop: %v (%d posted)", want, posts.Load())
	}
}

func checkEvent(t *testing.T, ev *eventsv1.Event, ns, kind, note string) {
	t.Helper()
	host := Controller + "-"
	if ev.Namespace != ns || ev.Reason != Reason || ev.Type != kind || ev.Note != note ||
		ev.ReportingController != Controller || !strings.HasPrefix(ev.ReportingInstance, host) || ev.EventTime.IsZero() ||
		ev.Regarding.Kind != "Pod" || ev.Regarding.Name != "worker-7" || ev.Regarding.Namespace != ns || ev.Regarding.UID != "u-1" ||
		ev.Related == nil || ev.Related.Kind != "Lease" || ev.Related.Name != "billing" || ev.Series != nil ||
		!strings.HasPrefix(ev.Name, "worker-7.") {
		t.Fatalf("Event %s:\n%+v", ev.Action, ev)
	}
}

// TestRefusedEventIsNotSentAgain: a user without permission to create
// Events gets one refusal per Event, logged with the API server's message,
// and the election's calls return at once.
func TestRefusedEventIsNotSentAgain(t *testing.T) {
	ns := namespace(t)
	var posts atomic.Int64
	var logs logBuffer
	r, err := New(Config{Client: countingClient(t, "nobody", &posts), Pod: Pod{Namespace: ns, Name: "p"},
		LeaseNamespace: ns, LeaseName: "l", Identity: "p_1", Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	r.LeadershipChanged(true, 1)
	r.Stop()
	if n := posts.Load(); n != 1 {
		t.Fatalf("%d requests for one refused Event, want 1", n)
	}
	for _, want := range []string{"not retrying", "forbidden", `cannot create resource \"events\"`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestStopBeforeAnyEvent: a Recorder that never recorded has started
// nothing, and Stop returns at once; an Event after Stop is dropped.
func TestStopBeforeAnyEvent(t *testing.T) {
	before := goleak.IgnoreCurrent()
	var posts atomic.Int64
	r, err := New(Config{Client: countingClient(t, "", &posts), Pod: Pod{Name: "p"}, LeaseNamespace: "default", LeaseName: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(append(kubetest.IdleClientGoroutines(), before)...); err != nil {
		t.Fatalf("New started a goroutine: %v", err)
	}
	r.Stop()
	r.Stop()
	r.LeadershipChanged(true, 1)
	if n := posts.Load(); n != 0 {
		t.Fatalf("%d Events posted after Stop", n)
	}
	goleak.VerifyNone(t, append(kubetest.IdleClientGoroutines(), before)...)
}

func TestNewRejects(t *testing.T) {
	c, err := kubeclient.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"no client":   {Pod: Pod{Name: "p"}},
		"no Pod name": {Client: c},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
