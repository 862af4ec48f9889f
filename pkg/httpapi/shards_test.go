package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// runGroup runs a real shard group replica of 4 shards on store until
// the test ends (a graceful stop).
func runGroup(t *testing.T, store *memory.Store, id string) *shardgroup.Group {
	t.Helper()
	shards := make([]backend.Backend, 4)
	for i := range shards {
		shards[i] = store.Open(shardgroup.ShardRecord("g", i))
	}
	member := store.Open(shardgroup.MemberRecord("g", id))
	g, err := shardgroup.New(shardgroup.Config{
		Group: "g", Identity: id, Shards: shards, Member: member, Members: member,
		Election: election.Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
			RetryPeriod: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)},
		RebalanceDelay: time.Second, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

func call(t *testing.T, h http.Handler, method, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:4040"
	h.ServeHTTP(rec, req)
	if v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s %s: %v in %q", method, path, err, rec.Body.String())
		}
	}
	return rec.Code
}

// TestShardsAPI drives the shard API of a real group on a memory store:
// the shards held with their tokens, ranges and selector; 409 with the
// holder for a shard held elsewhere; the owner of a key; a drain that
// waits for POST /shards/{i}/drained; and /leader pointing to /shards.
func TestShardsAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := runGroup(t, store, "a")
		h := NewShardsAppHandler(a, Options{})
		time.Sleep(2 * time.Second)

		var all ShardsJSON
		if code := call(t, h, "GET", "/shards", &all); code != 200 || all.Group != "g" || all.Shards != 4 || len(all.Held) != 4 ||
			all.FairShare != 4 || all.ShardSelector != "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')" {
			t.Fatalf("GET /shards: %d %+v", code, all)
		}
		for i, s := range all.Held {
			r, _ := shard.RangeOf(i, 4)
			if s.Shard != i || s.Token != 1 || s.State != "held" || s.Range.Start != r.StartText() || s.Range.End != r.EndText() {
				t.Errorf("held[%d] = %+v", i, s)
			}
		}
		var owner OwnerJSON
		if code := call(t, h, "GET", "/shards/owner?key=abc", &owner); code != 200 || owner.Shard != shard.OfKey("abc", 4) ||
			owner.Holder != "a" || !owner.HeldHere || owner.Token != 1 {
			t.Errorf("GET /shards/owner?key=abc: %d %+v", code, owner)
		}
		var refusal ShardErrorJSON
		if code := call(t, h, "GET", "/shards/owner", &refusal); code != 400 {
			t.Errorf("GET /shards/owner without a key: %d %+v", code, refusal)
		}
		ops := NewShardsOpsHandler(a, Options{})
		for _, c := range []struct {
			h            http.Handler
			method, path string
		}{{h, "GET", "/leader"}, {h, "GET", "/leader/watch"}, {h, "GET", "/"}, {h, "GET", "/leader/ready"},
			{h, "POST", "/leader/release"}, {h, "POST", "/leader/handoff"}, {ops, "GET", "/leader/ready"}} {
			refusal = ShardErrorJSON{}
			if code := call(t, c.h, c.method, c.path, &refusal); code != 409 || !strings.Contains(refusal.Error, "GET /shards") {
				t.Errorf("%s %s in shard mode: %d %+v", c.method, c.path, code, refusal)
			}
		}
		if code := call(t, ops, "GET", "/metrics", nil); code != 404 {
			t.Errorf("GET /metrics in shard mode: %d, want 404 (not built)", code)
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if code := call(t, ops, "GET", path, nil); code != 200 {
				t.Errorf("GET %s on the ops listener: %d", path, code)
			}
		}
		if code := call(t, h, "GET", "/shards/4", &refusal); code != 404 {
			t.Errorf("GET /shards/4: %d %+v", code, refusal)
		}
		if code := call(t, h, "POST", "/shards/0/drained", &refusal); code != 409 {
			t.Errorf("POST /shards/0/drained of a shard that does not drain: %d %+v", code, refusal)
		}

		b := runGroup(t, store, "b")
		hb := NewShardsAppHandler(b, Options{})
		time.Sleep(time.Second + 2*500*time.Millisecond)
		var draining []int
		call(t, h, "GET", "/shards", &all)
		for _, s := range all.Held {
			if s.State == "draining" {
				draining = append(draining, s.Shard)
			}
		}
		if len(draining) != 2 || len(all.Held) != 4 {
			t.Fatalf("after b joined, a answers %+v; want 4 held, 2 draining", all)
		}
		var one ShardJSON
		path := "/shards/" + strconv.Itoa(draining[0])
		if code := call(t, h, "GET", path, &one); code != 200 || one.State != "draining" || one.Token != 1 {
			t.Errorf("GET %s on a: %d %+v", path, code, one)
		}
		if code := call(t, hb, "GET", path, &refusal); code != 409 || refusal.Holder != "a" {
			t.Errorf("GET %s on b: %d %+v, want 409 naming a", path, code, refusal)
		}
		if code := call(t, h, "POST", path+"/drained", nil); code != 200 {
			t.Errorf("POST %s/drained: %d", path, code)
		}
		time.Sleep(time.Second)
		if code := call(t, hb, "GET", path, &one); code != 200 || one.Token != 2 || one.State != "held" {
			t.Errorf("GET %s on b after the acknowledgement: %d %+v, want held with token 2", path, code, one)
		}
		if code := call(t, h, "GET", path, &refusal); code != 409 || refusal.Holder != "b" {
			t.Errorf("GET %s on a after the acknowledgement: %d %+v, want 409 naming b", path, code, refusal)
		}
	})
}

// streamRecorder is a ResponseWriter that a handler may write to while
// the test reads what it wrote.
type streamRecorder struct {
	mu     sync.Mutex
	header http.Header
	body   strings.Builder
}

func (r *streamRecorder) Header() http.Header { return r.header }
func (r *streamRecorder) WriteHeader(int)     {}
func (r *streamRecorder) Flush()              {}
func (r *streamRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.Write(p)
}

// sseEvent is one event of a stream: its name ("" for an unnamed event)
// and its data.
type sseEvent struct{ name, data string }

// all are the events written so far.
func (r *streamRecorder) all() []sseEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sseEvent
	for block := range strings.SplitSeq(r.body.String(), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		if ev.data != "" {
			out = append(out, ev)
		}
	}
	return out
}

// events are the states (the unnamed events) written so far.
func (r *streamRecorder) events(t *testing.T) []ShardsJSON {
	var out []ShardsJSON
	for _, ev := range r.all() {
		if ev.name != "" {
			continue
		}
		var st ShardsJSON
		if err := json.Unmarshal([]byte(ev.data), &st); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		out = append(out, st)
	}
	return out
}

func heldStates(st ShardsJSON) string {
	var b strings.Builder
	for _, h := range st.Held {
		fmt.Fprintf(&b, "%d:%d:%s ", h.Shard, h.Token, h.State)
	}
	return b.String()
}

// TestShardsWatch follows GET /shards/watch of a real group: the state at
// once, every change after (the shards acquired, then drained and
// released to a newcomer), and no event for renewals alone.
func TestShardsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := runGroup(t, store, "a")
		h := NewShardsAppHandler(a, Options{KeepAlive: time.Hour})
		rec := &streamRecorder{header: http.Header{}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/shards/watch", nil).WithContext(ctx))
		}()
		time.Sleep(2 * time.Second)
		evs := rec.events(t)
		if len(evs) == 0 || len(evs[len(evs)-1].Held) != 4 {
			t.Fatalf("events after 2s: %v, want the last to hold 4 shards", evs)
		}
		settled := len(evs)
		time.Sleep(10 * time.Second) // renewals every second
		if n := len(rec.events(t)); n != settled {
			t.Errorf("%d events while nothing but renewals happened", n-settled)
		}

		runGroup(t, store, "b")
		time.Sleep(10 * time.Second) // the drain timeout is 5s
		evs = rec.events(t)
		var drainSeen bool
		for _, ev := range evs[settled:] {
			drainSeen = drainSeen || strings.Contains(heldStates(ev), "draining")
		}
		if last := evs[len(evs)-1]; !drainSeen || len(last.Held) != 2 || len(last.Members) != 2 {
			t.Errorf("events after b joined: %v; want draining shards, then 2 held of 2 members", evs[settled:])
		}
		cancel()
		<-done
	})
}

// TestADrainAcknowledgementNamesItsTerm: POST /shards/{i}/drained?token=N
// releases the shard only when N is the token of the term that drains: an
// acknowledgement of another term (a late one, of a drain that was undone
// before this one began) is refused with 409 and changes nothing; a token
// that is not a number is a 400; the right token releases at once.
func TestADrainAcknowledgementNamesItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := runGroup(t, store, "a")
		h := NewShardsAppHandler(a, Options{})
		time.Sleep(2 * time.Second)
		b := runGroup(t, store, "b")
		hb := NewShardsAppHandler(b, Options{})
		time.Sleep(time.Second + 2*500*time.Millisecond)
		var all ShardsJSON
		call(t, h, "GET", "/shards", &all)
		var draining []ShardJSON
		for _, s := range all.Held {
			if s.State == "draining" {
				draining = append(draining, s)
			}
		}
		if len(draining) == 0 {
			t.Fatalf("after b joined, a answers %+v; want shards draining", all)
		}
		d := draining[0]
		path := "/shards/" + strconv.Itoa(d.Shard)
		var refusal ShardErrorJSON
		other := strconv.FormatInt(d.Token+1, 10)
		if code := call(t, h, "POST", path+"/drained?token="+other, &refusal); code != 409 ||
			!strings.Contains(refusal.Error, "token "+strconv.FormatInt(d.Token, 10)) || !strings.Contains(refusal.Error, "token "+other) {
			t.Errorf("POST %s/drained?token=%s while it drains in the term of token %d: %d %+v, want 409 naming both tokens", path, other, d.Token, code, refusal)
		}
		refusal = ShardErrorJSON{}
		if code := call(t, h, "POST", path+"/drained?token=seven", &refusal); code != 400 || !strings.Contains(refusal.Error, "token") {
			t.Errorf("POST %s/drained?token=seven: %d %+v, want 400 naming the token", path, code, refusal)
		}
		time.Sleep(time.Second)
		var one ShardJSON
		if code := call(t, h, "GET", path, &one); code != 200 || one.State != "draining" || one.Token != d.Token {
			t.Errorf("GET %s on a after the refused acknowledgements: %d %+v, want still draining with token %d", path, code, one, d.Token)
		}
		if code := call(t, h, "POST", path+"/drained?token="+strconv.FormatInt(d.Token, 10), nil); code != 200 {
			t.Errorf("POST %s/drained?token=%d: %d, want 200", path, d.Token, code)
		}
		time.Sleep(time.Second)
		if code := call(t, hb, "GET", path, &one); code != 200 || one.Token != d.Token+1 || one.State != "held" {
			t.Errorf("GET %s on b after the acknowledgement: %d %+v, want held with token %d", path, code, one, d.Token+1)
		}
	})
}
