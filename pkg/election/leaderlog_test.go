package election

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// capturedLogs is a slog.Handler that keeps every record at Info or above.
type capturedLogs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *capturedLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *capturedLogs) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *capturedLogs) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capturedLogs) WithGroup(string) slog.Handler      { return c }

// leaderChanges are the "leader changed" lines, as "holder/token" (token
// "-" when the line has none).
func (c *capturedLogs) leaderChanges() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.records {
		if !strings.HasPrefix(r.Message, "leader changed") {
			continue
		}
		if r.Level != slog.LevelInfo {
			out = append(out, "not at Info: "+r.Message)
		}
		holder, token := "?", "-"
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "holder":
				holder = a.Value.String()
			case "token":
				token = a.Value.String()
			}
			return true
		})
		out = append(out, holder+"/"+token)
	}
	return out
}

// logged makes id a candidate of h that logs to a capture.
func logged(h *harness, id string) *capturedLogs {
	h.t.Helper()
	logs := &capturedLogs{}
	handle := &hookedBackend{Backend: h.store.Open(electionName)}
	obs := &recordingObserver{}
	e, err := New(Config{Backend: handle, Identity: id, Clock: h.clock, Logger: slog.New(logs), Observer: obs})
	if err != nil {
		h.t.Fatal(err)
	}
	h.candidates[id], h.handles[id], h.observers[id] = e, handle, obs
	return logs
}

func loggedChanges(logs *capturedLogs, want ...string) step {
	return func(h *harness) {
		h.t.Helper()
		if got := logs.leaderChanges(); fmt.Sprint(got) != fmt.Sprint(want) {
			h.t.Fatalf("at +%v the standby logged leader changes %q, want %q", h.clock.Since(epoch), got, want)
		}
	}
}

// A standby logs one Info line, with the holder and token, each time who
// leads changes, and nothing while the same leader renews.
func TestStandbyLogsWhoLeadsWhenItChanges(t *testing.T) {
	h := newHarness(t)
	logs := logged(h, "s")
	for _, step := range []step{
		try("a", true), try("s", false), try("s", false), loggedChanges(logs, "a/1"),
		repeat(20, advance(2*time.Second), try("a", true), try("s", false)),
		loggedChanges(logs, "a/1"), // renewals change nothing
		release("a"), try("b", true), try("s", false), loggedChanges(logs, "a/1", "b/2"),
		deleteRecord(), try("s", false), loggedChanges(logs, "a/1", "b/2", "/-"),
		try("b", true), leads("b", 3), try("s", false), // b recreates it: a new term of the same holder
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3"),
		repeat(5, advance(2*time.Second), try("b", true), try("s", false)),
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3"),
		release("b"), try("s", true), leads("s", 4), // it sees the release, then its own term
		loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3"),
		release("s"), advance(15 * time.Second), try("a", true), loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3"),
		try("s", false), loggedChanges(logs, "a/1", "b/2", "/-", "b/3", "/3", "a/5"),
	} {
		step(h)
	}
}

// A standby that starts while another leads says so once.
func TestStandbyLogsTheLeaderItFindsAtStart(t *testing.T) {
	h := newHarness(t)
	logs := logged(h, "b")
	for _, s := range []step{
		try("a", true), try("b", false), try("b", false), loggedChanges(logs, "a/1"),
		advance(15 * time.Second), try("b", true), leads("b", 2), loggedChanges(logs, "a/1"),
	} {
		s(h)
	}
}
