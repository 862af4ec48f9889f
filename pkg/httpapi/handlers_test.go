package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testInfo = Info{Lease: "billing", Backend: "sqlite"}

// serve sends one request to h as a client of the loopback listener would
// (Host 127.0.0.1:4040).
func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:4040"
	h.ServeHTTP(rec, req)
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body, err)
	}
	return m
}

func TestLeaderWhileLeading(t *testing.T) {
	f := newFake(leading(7, 10*time.Second))
	rec := serve(NewAppHandler(f, testInfo, Options{}), "GET", "/leader")
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-store" ||
		rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d headers %v", rec.Code, rec.Header())
	}
	m := decode(t, rec)
	until, err := time.Parse(time.RFC3339Nano, m["validUntil"].(string))
	if err != nil {
		t.Fatalf("validUntil %v is not RFC 3339: %v", m["validUntil"], err)
	}
	if m["leader"] != true || m["token"] != float64(7) || m["identity"] != "me_1" || m["holder"] != "me_1" ||
		m["lease"] != "billing" || m["backend"] != "sqlite" || !until.Equal(f.Status().ValidUntil) {
		t.Fatalf("body %v", m)
	}
}

func TestLeaderWhileFollowingHasNullToken(t *testing.T) {
	rec := serve(NewAppHandler(newFake(following("other_2")), testInfo, Options{}), "GET", "/leader")
	m := decode(t, rec)
	for _, k := range []string{"token", "validUntil"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Fatalf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if m["leader"] != false || m["holder"] != "other_2" {
		t.Fatalf("body %v", m)
	}
}

func TestLeaderLapsesAtValidUntilWithoutAnyEvent(t *testing.T) {
	f := newFake(leading(3, -time.Nanosecond))
	if m := decode(t, serve(NewAppHandler(f, testInfo, Options{}), "GET", "/leader")); m["leader"] != false || m["token"] != nil {
		t.Fatalf("a lapsed claim answered %v", m)
	}
}

func TestProbes(t *testing.T) {
	cases := []struct {
		name    string
		status  election.Status
		healthy bool
		path    string
		code    int
		body    string
	}{
		{"ready while leading", leading(1, time.Minute), true, "/leader/ready", 200, "leader"},
		{"not ready while following", following("x"), true, "/leader/ready", 503, "not leader"},
		{"healthy", following("x"), true, "/healthz", 200, "ok"},
		{"wedged", following("x"), false, "/healthz", 503, "wedged"},
		{"ready once the store answered", following(""), true, "/readyz", 200, "ok"},
		{"not ready before the store answered", election.Status{Identity: "me_1"}, true, "/readyz", 503, "store not reached"},
		{"not ready while wedged", following("x"), false, "/readyz", 503, "wedged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.status)
			f.SetHealthy(c.healthy)
			for _, h := range []http.Handler{NewAppHandler(f, testInfo, Options{}), NewOpsHandler(f, testInfo, Options{})} {
				rec := serve(h, "GET", c.path)
				if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) {
					t.Fatalf("%s: %d %q, want %d containing %q", c.path, rec.Code, rec.Body, c.code, c.body)
				}
				token, want := rec.Header().Get(TokenHeader), ""
				if c.path == "/leader/ready" && c.code == 200 {
					want = fmt.Sprint(c.status.Token)
				}
				if token != want {
					t.Fatalf("%s: %s %q, want %q (the token of the term it answers for, only with a 200)", c.path, TokenHeader, token, want)
				}
			}
		})
	}
}

func TestRelease(t *testing.T) {
	f := newFake(leading(4, time.Minute))
	rec := serve(NewAppHandler(f, testInfo, Options{}), "POST", "/leader/release")
	if m := decode(t, rec); rec.Code != 200 || m["leader"] != false || f.Releases() != 1 || m["error"] != nil {
		t.Fatalf("%d %v after %d releases", rec.Code, m, f.Releases())
	}
}

func TestReleaseThatCannotWriteStillStepsDown(t *testing.T) {
	f := newFake(leading(4, time.Minute))
	f.SetReleaseError(errors.New("release: store unreachable"))
	rec := serve(NewAppHandler(f, testInfo, Options{}), "POST", "/leader/release")
	m := decode(t, rec)
	if rec.Code != 503 || m["leader"] != false || !strings.Contains(m["error"].(string), "store unreachable") {
		t.Fatalf("%d %v", rec.Code, m)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "x_total 1\n") })
	f := newFake(following(""))
	for _, h := range []http.Handler{NewAppHandler(f, testInfo, Options{Metrics: metrics}), NewOpsHandler(f, testInfo, Options{Metrics: metrics})} {
		if rec := serve(h, "GET", "/metrics"); rec.Code != 200 || rec.Body.String() != "x_total 1\n" {
			t.Fatalf("metrics: %d %q", rec.Code, rec.Body)
		}
	}
	if rec := serve(NewAppHandler(f, testInfo, Options{}), "GET", "/metrics"); rec.Code != 404 {
		t.Fatalf("metrics without a handler: %d, want 404", rec.Code)
	}
	// Shard mode serves them on both listeners alike.
	var g ShardGroup // not called by /metrics
	for _, h := range []http.Handler{NewShardsAppHandler(g, Options{Metrics: metrics}), NewShardsOpsHandler(g, Options{Metrics: metrics})} {
		if rec := serve(h, "GET", "/metrics"); rec.Code != 200 || rec.Body.String() != "x_total 1\n" {
			t.Fatalf("metrics in shard mode: %d %q", rec.Code, rec.Body)
		}
	}
	if rec := serve(NewShardsOpsHandler(g, Options{}), "GET", "/metrics"); rec.Code != 404 {
		t.Fatalf("metrics in shard mode without a handler: %d, want 404", rec.Code)
	}
}

func TestWrongMethodAndUnknownPath(t *testing.T) {
	f := newFake(following(""))
	app, ops := NewAppHandler(f, testInfo, Options{}), NewOpsHandler(f, testInfo, Options{})
	cases := []struct {
		h            http.Handler
		method, path string
		code         int
		allow        string
	}{
		{app, "POST", "/leader", 405, "GET, HEAD"},
		{app, "DELETE", "/leader/watch", 405, "GET, HEAD"},
		{app, "GET", "/leader/release", 405, "POST"},
		{app, "PUT", "/healthz", 405, "GET, HEAD"},
		{app, "GET", "/nope", 404, ""},
		{app, "GET", "/leader/", 404, ""},
		{ops, "GET", "/leader", 404, ""},
		{ops, "POST", "/leader/release", 404, ""},
		{ops, "GET", "/leader/watch", 404, ""},
		{ops, "POST", "/leader/ready", 405, "GET, HEAD"},
	}
	for _, c := range cases {
		rec := serve(c.h, c.method, c.path)
		if rec.Code != c.code || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow=%q, want %d Allow=%q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), c.code, c.allow)
		}
	}
	if f.Releases() != 0 {
		t.Fatal("a rejected request released the lease")
	}
}

// A standby's release is refused with 409 and a JSON error, and changes
// nothing: it would otherwise keep the standby out of the election.
func TestReleaseOnAStandbyConflicts(t *testing.T) {
	for name, status := range map[string]election.Status{
		"following a leader": following("other_2"),
		"nobody leads":       following(""),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(status)
			changed := f.Changed()
			rec := serve(NewAppHandler(f, testInfo, Options{}), "POST", "/leader/release")
			m := decode(t, rec)
			if rec.Code != http.StatusConflict || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q, want 409 with JSON", rec.Code, rec.Header().Get("Content-Type"))
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, "not the leader") ||
				m["leader"] != false || m["holder"] != status.Holder || m["token"] != nil {
				t.Fatalf("body %v, want the unchanged state and an error saying it is not the leader", m)
			}
			if f.Releases() != 0 || f.Status() != status {
				t.Fatalf("%d releases, status %+v: the refused release changed something", f.Releases(), f.Status())
			}
			select {
			case <-changed:
				t.Fatal("the refused release signalled a change")
			default:
			}
		})
	}
}
