package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// serveBody sends one POST with body to h from a loopback client.
func serveBody(h http.Handler, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Host = "127.0.0.1:4040"
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandoff(t *testing.T) {
	cases := []struct {
		name, body string
		want       string // the target handed to the elector
		holder     string
	}{
		{"to a named candidate", `{"to": "web-2"}`, "web-2", "web-2"},
		{"to a full identity", `{"to":"web-2_0b1e2d3c"}`, "web-2_0b1e2d3c", "web-2_0b1e2d3c"},
		{"to anyone, no body", ``, "", "standby"},
		{"to anyone, blank body", " \n", "", "standby"},
		{"to anyone, empty object", `{}`, "", "standby"},
		{"to anyone, empty target", `{"to": ""}`, "", "standby"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(leading(4, time.Minute))
			rec := serveBody(NewAppHandler(f, testInfo, Options{}), "/leader/handoff", c.body)
			m := decode(t, rec)
			if rec.Code != 200 || m["leader"] != false || m["holder"] != c.holder || m["token"] != nil || m["error"] != nil {
				t.Fatalf("%d %v, want 200, not leader, holder %q, no error", rec.Code, m, c.holder)
			}
			if got := f.Handoffs(); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("handed off to %q, want [%q]", got, c.want)
			}
		})
	}
}

func TestHandoffFailures(t *testing.T) {
	cases := []struct {
		name    string
		status  election.Status
		err     error
		code    int
		mention string
	}{
		{"a standby", following("other_2"), nil, http.StatusConflict, "not the leader"},
		{"nobody answers", leading(4, time.Minute),
			fmt.Errorf("%w: candidate %q did not answer within 1s: it is not a live candidate of this election", election.ErrNoTaker, "ghost"),
			http.StatusUnprocessableEntity, `candidate "ghost" did not answer`},
		{"the store fails", leading(4, time.Minute), errors.New("hand-off: writing the offer: connection refused"),
			http.StatusServiceUnavailable, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.status)
			f.SetHandoffError(c.err)
			rec := serveBody(NewAppHandler(f, testInfo, Options{}), "/leader/handoff", `{"to": "ghost"}`)
			m := decode(t, rec)
			if rec.Code != c.code || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q, want %d with JSON", rec.Code, rec.Header().Get("Content-Type"), c.code)
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, c.mention) || m["leader"] != c.status.Leader || m["holder"] != c.status.Holder {
				t.Fatalf("body %v, want the unchanged state and an error mentioning %q", m, c.mention)
			}
			if len(f.Handoffs()) != 0 || f.Status().Leader != c.status.Leader {
				t.Fatalf("the failed hand-off changed something: %v, %+v", f.Handoffs(), f.Status())
			}
		})
	}
}

// A body that is not {"to": "..."} is refused with 400, naming what is
// wrong, and nothing is handed off.
func TestHandoffBadBodies(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":            `web-2`,
		"a number":            `{"to": 3}`,
		"an unknown field":    `{"target": "web-2"}`,
		"an array":            `["web-2"]`,
		"two values":          `{"to": "a"} {"to": "b"}`,
		"cut short":           `{"to": "web-`,
		"larger than allowed": `{"to": "` + strings.Repeat("x", 5000) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(leading(4, time.Minute))
			rec := serveBody(NewAppHandler(f, testInfo, Options{}), "/leader/handoff", body)
			m := decode(t, rec)
			if msg, _ := m["error"].(string); rec.Code != http.StatusBadRequest || !strings.Contains(msg, `{"to": "<identity or Pod name>"}`) {
				t.Fatalf("%d %v, want 400 saying what the body must be", rec.Code, m)
			}
			if m["leader"] != true || len(f.Handoffs()) != 0 {
				t.Fatalf("a refused body changed something: %v, %v", m, f.Handoffs())
			}
		})
	}
}

// The hand-off changes the election: like the release, it is refused to
// a foreign Host and to a cross-origin browser, absent from the ops
// listener, and POST only.
func TestHandoffIsGuardedLikeRelease(t *testing.T) {
	f := newFake(leading(4, time.Minute))
	app := NewAppHandler(f, testInfo, Options{})
	for name, headers := range map[string]map[string]string{
		"rebound name":       {"Host": "attacker.example:4040"},
		"cross-site browser": {"Sec-Fetch-Site": "cross-site"},
		"foreign Origin":     {"Origin": "https://attacker.example"},
	} {
		req := httptest.NewRequest("POST", "/leader/handoff", strings.NewReader(`{"to":"b"}`))
		req.Host = "127.0.0.1:4040"
		for k, v := range headers {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		app.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, rec.Code)
		}
	}
	if rec := serve(app, "GET", "/leader/handoff"); rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET /leader/handoff: %d Allow=%q, want 405 Allow=POST", rec.Code, rec.Header().Get("Allow"))
	}
	if rec := serve(NewOpsHandler(f, testInfo, Options{}), "POST", "/leader/handoff"); rec.Code != 404 {
		t.Errorf("POST /leader/handoff on the ops listener: %d, want 404", rec.Code)
	}
	if len(f.Handoffs()) != 0 || !f.Status().Leader {
		t.Fatalf("a refused request handed off: %v", f.Handoffs())
	}
}
