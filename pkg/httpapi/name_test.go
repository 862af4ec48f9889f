package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi/httpapitest"
)

// GET / answers as the contrib leader-elector did: the holder's Pod name,
// on the leader and on standbys alike, "" when nobody holds the record.
func TestRootAnswersTheHoldersPodName(t *testing.T) {
	cases := []struct {
		name   string
		status election.Status
		want   string
	}{
		{"on the leader", httpapitest.Leading("web-7d9f4-x2x7k_0b1e2d3c-4f5a-6b7c-8d9e-0f1a2b3c4d5e", 3, time.Minute), "web-7d9f4-x2x7k"},
		{"on a standby", httpapitest.Following("web-7d9f4-abcde_1", "web-7d9f4-x2x7k_0b1e2d3c-4f5a-6b7c-8d9e-0f1a2b3c4d5e"), "web-7d9f4-x2x7k"},
		{"a holder whose own claim lapsed is still the record's holder", httpapitest.Leading("web-0_1", 3, -time.Second), "web-0"},
		{"a holder without a suffix", httpapitest.Following("web-1_2", "client-go-candidate"), "client-go-candidate"},
		{"nobody holds the record", httpapitest.Following("web-1_2", ""), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := serve(NewAppHandler(newFake(c.status), testInfo, Options{}), "GET", "/")
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" ||
				rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("GET /: %d %v", rec.Code, rec.Header())
			}
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || len(m) != 1 || m["name"] != c.want {
				t.Fatalf("GET / answered %q, want exactly {\"name\": %q}", rec.Body, c.want)
			}
		})
	}
}

func TestRootIsOnlyRoot(t *testing.T) {
	f := newFake(following("web-0_1"))
	app, ops := NewAppHandler(f, testInfo, Options{}), NewOpsHandler(f, testInfo, Options{})
	for _, c := range []struct {
		h            http.Handler
		method, path string
		code         int
	}{
		{app, "GET", "/", 200},
		{app, "HEAD", "/", 200},
		{app, "GET", "/anything", 404},
		{app, "GET", "/index.html", 404},
		{app, "POST", "/", 405},
		{ops, "GET", "/", 404},
	} {
		if rec := serve(c.h, c.method, c.path); rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.code)
		}
	}
}
