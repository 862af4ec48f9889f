package statusview

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// --watch prints a row when what an operator acts on changes (holder,
// token, hand-off, state), not on every renewal; a holder that stops
// renewing turns stale with time alone; a record that goes is printed as
// deleted.
func TestWatcherPrintsChanges(t *testing.T) {
	w := newWatcher()
	a := heldAt("a", "a-0_x", 1, time.Minute, time.Second)
	b := heldAt("b", "b-0_x", 5, time.Minute, time.Second)
	names := func(rows []Row) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.Name+":"+r.Holder+":"+r.State)
		}
		return strings.Join(s, " ")
	}
	if got := names(w.apply(Update{Full: true, Elections: []Election{b, a}}, observed)); got != "a:a-0_x:held b:b-0_x:held" {
		t.Fatalf("first list: %q", got)
	}
	renewed := a
	renewed.Record.RenewTime, renewed.Version = observed, "43"
	if got := w.apply(Update{Elections: []Election{renewed}}, observed); len(got) != 0 {
		t.Fatalf("a renewal printed %q", names(got))
	}
	moved := renewed
	moved.Record.HolderIdentity, moved.Record.Transitions = "a-1_y", 2
	if got := names(w.apply(Update{Elections: []Election{moved}}, observed)); got != "a:a-1_y:held" {
		t.Fatalf("leadership moved: %q", got)
	}
	if got := w.recheck(observed.Add(10 * time.Second)); len(got) != 0 {
		t.Fatalf("within the lease: %q", names(got))
	}
	// a renewed at observed; b a second before it. 14.5s later b is stale, a not yet.
	if got := names(w.recheck(observed.Add(14*time.Second + 500*time.Millisecond))); got != "b:b-0_x:stale" {
		t.Fatalf("b stopped renewing: %q", got)
	}
	if got := names(w.apply(Update{Gone: []Election{b}}, observed)); got != "b:b-0_x:deleted" {
		t.Fatalf("b deleted: %q", got)
	}
	if got := names(w.apply(Update{Full: true, Elections: nil}, observed)); got != "a:a-1_y:deleted" {
		t.Fatalf("a gone from a full list: %q", got)
	}
	if got := w.apply(Update{Full: true}, observed); len(got) != 0 {
		t.Fatalf("nothing left, yet %q", names(got))
	}
}

// fakeSource holds els for Read, and sends what the test feeds to Follow.
type fakeSource struct {
	els  []Election
	feed chan Update
}

func (s fakeSource) Read(context.Context) ([]Election, error) { return s.els, nil }

func (s fakeSource) Follow(ctx context.Context, updates chan<- Update, _ func(error)) {
	for {
		select {
		case u := <-s.feed:
			if !Send(ctx, updates, u) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// lockedBuffer is a bytes.Buffer that View's goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was written since the last take.
func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// List prints a header and a row per election, and the note on clocks
// once when a row is stale; -o json prints the List; with no election it
// says so on stderr and prints nothing.
func TestViewList(t *testing.T) {
	src := fakeSource{els: []Election{
		heldAt("billing", "billing-0_x", 12, 3*time.Minute+12*time.Second, 2*time.Second),
		heldAt("cron", "cron-0_y", 3, time.Hour, time.Minute),
		heldAt("reports", "reports-0_z", 5, time.Hour, time.Hour),
	}}
	var out, errOut lockedBuffer
	v := View{Out: &out, ErrOut: &errOut, Now: func() time.Time { return observed }}
	if err := v.List(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      HOLDER        TOKEN   TERM    RENEWED    LEASE   HANDOFF   STATE\n" +
		"billing   billing-0_x   12      3m12s   2.0s ago   15s     -         held\n" +
		"cron      cron-0_y      3       1h0m    1m0s ago   15s     -         stale\n" +
		"reports   reports-0_z   5       1h0m    1h0m ago   15s     -         stale\n"
	if got := out.take(); got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if got := errOut.take(); got != StaleNote+"\n" {
		t.Fatalf("stderr %q, want the note on clocks once", got)
	}

	v = View{Out: &out, ErrOut: &errOut, Now: func() time.Time { return observed }, JSON: true}
	if err := v.List(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	var list List
	if got := out.take(); json.Unmarshal([]byte(got), &list) != nil || len(list.Elections) != 3 || list.Elections[1].State != StateStale ||
		!strings.HasPrefix(got, "{\n  \"elections\": [\n") {
		t.Fatalf("-o json: %q", got)
	}
	if got := errOut.take(); got != "" {
		t.Fatalf("-o json wrote %q on stderr", got)
	}

	if err := v.List(t.Context(), fakeSource{}); err != nil {
		t.Fatal(err)
	}
	v.JSON = false
	if err := v.List(t.Context(), fakeSource{}); err != nil {
		t.Fatal(err)
	}
	if got, gotErr := out.take(), errOut.take(); got != "{\n  \"elections\": []\n}\n" || gotErr != "No elections found.\n" {
		t.Fatalf("no election: stdout %q, stderr %q; want an empty list in JSON, then the words on stderr", got, gotErr)
	}
}

// Watch prints the first list with the header, then only the rows that
// change, without the header again; a holder that stops renewing is
// printed stale once its lease has passed with no update, with the note;
// the end of ctx ends it with no error.
func TestViewWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := fakeSource{feed: make(chan Update)}
		var out, errOut lockedBuffer
		v := View{Out: &out, ErrOut: &errOut, Now: time.Now}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- v.Watch(ctx, src) }()

		at := func(name, holder string, token int64) Election {
			now := time.Now()
			return Election{Name: name, Version: "1", Record: backend.Record{HolderIdentity: holder, LeaseDurationSeconds: 15,
				Transitions: token, AcquireTime: now, RenewTime: now}}
		}
		fields := func(s string) string { return strings.Join(strings.Fields(s), " ") }

		src.feed <- Update{Full: true, Elections: []Election{at("b", "b-0_x", 2), at("a", "a-0_x", 1)}}
		synctest.Wait()
		if got := fields(out.take()); got != "NAME HOLDER TOKEN TERM RENEWED LEASE HANDOFF STATE "+
			"a a-0_x 1 0ms 0ms ago 15s - held b b-0_x 2 0ms 0ms ago 15s - held" {
			t.Fatalf("first list: %q", got)
		}

		time.Sleep(5 * time.Second)
		src.feed <- Update{Elections: []Election{at("a", "a-0_x", 1)}} // a renews
		synctest.Wait()
		if got := out.take(); got != "" {
			t.Fatalf("a renewal printed %q", got)
		}
		src.feed <- Update{Elections: []Election{at("a", "a-1_y", 2)}}
		synctest.Wait()
		if got := fields(out.take()); got != "a a-1_y 2 0ms 0ms ago 15s - held" {
			t.Fatalf("a moved: %q", got)
		}

		// b was last renewed 5s before a moved: its lease ends 10s later.
		time.Sleep(10*time.Second + staleRecheck)
		synctest.Wait()
		if got := fields(out.take()); !strings.HasPrefix(got, "b b-0_x 2 ") || !strings.HasSuffix(got, " stale") {
			t.Fatalf("b stopped renewing: %q", got)
		}
		if got := errOut.take(); got != StaleNote+"\n" {
			t.Fatalf("stderr %q, want the note on clocks", got)
		}

		src.feed <- Update{Gone: []Election{at("b", "b-0_x", 2)}}
		synctest.Wait()
		if got := fields(out.take()); !strings.HasPrefix(got, "b b-0_x 2 ") || !strings.HasSuffix(got, " deleted") {
			t.Fatalf("b deleted: %q", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Watch: %v", err)
		}
	})
}
