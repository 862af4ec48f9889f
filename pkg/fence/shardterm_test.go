package fence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// stubShards serves GET /shards/watch: each stream it opens is handed to
// the test, which writes the stream's events.
type stubShards struct {
	*httptest.Server
	streams chan *stubStream
}

// stubStream is one open /shards/watch; closing out ends it.
type stubStream struct{ out chan string }

func newStubShards(t *testing.T) *stubShards {
	s := startStubShards()
	t.Cleanup(s.Close)
	return s
}

// startStubShards starts a stubShards; Close stops it. It also answers
// POST /shards/{i}/drained?token=N with 200, as the sidecar does for a
// shard draining in the term of token N, and 409 when the request names
// no term.
func startStubShards() *stubShards {
	s := &stubShards{streams: make(chan *stubStream, 4)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/drained") {
			if token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64); err != nil || token < 1 {
				w.WriteHeader(http.StatusConflict)
				fmt.Fprint(w, `{"error":"the acknowledgement names no term (?token=N)"}`)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.URL.Path != "/shards/watch" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		str := &stubStream{out: make(chan string)}
		s.streams <- str
		for {
			select {
			case ev, ok := <-str.out:
				if !ok {
					return
				}
				fmt.Fprint(w, ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	return s
}

// shardsState is the /shards/watch state of replica a_1 of group billing
// (4 shards) holding held, each valid for an hour.
func shardsState(held ...fence.ShardJSON) string {
	if held == nil {
		held = []fence.ShardJSON{}
	}
	body, _ := json.Marshal(fence.ShardsJSON{Group: "billing", Identity: "a_1", Shards: 4, Members: []string{"a_1"},
		FairShare: 4, Held: held})
	return "data: " + string(body) + "\n\n"
}

func held(shard int, token int64, state string) fence.ShardJSON {
	return fence.ShardJSON{Shard: shard, Token: token, State: state, ValidUntil: time.Now().Add(time.Hour),
		Range: fence.RangeJSON{Start: fmt.Sprintf("0x%016x", shard), End: fmt.Sprintf("0x%016x", shard+1)}}
}

func typedEvent(event string, shard int, token int64) string {
	state := event
	if event == fence.EventDraining || event == fence.EventAcquired || event == fence.EventUndrained {
		state = map[string]string{fence.EventDraining: fence.ShardDraining}[event]
		if state == "" {
			state = fence.ShardHeld
		}
	}
	body, _ := json.Marshal(fence.ShardEventJSON{Event: event, ShardJSON: fence.ShardJSON{Shard: shard, Token: token, State: state}})
	return "event: " + event + "\ndata: " + string(body) + "\n\n"
}

func nextTerm(t *testing.T, terms *fence.ShardTerms) *fence.ShardTerm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := terms.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return term
}

// endedWith waits until term is over and checks its cause.
func endedWith(t *testing.T, term *fence.ShardTerm, want error) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("shard %d's term not over 10s later", term.Shard())
	}
	if err := term.Err(); !errors.Is(err, want) {
		t.Fatalf("shard %d's term ended with %v, want %v", term.Shard(), err, want)
	}
}

// ShardTerms follows the stream: a term per shard held (one that drains
// comes over already, to be acknowledged), renewed by renewed events; a
// drain reported for each drain of a term; ended by draining, by lost, by a stream
// that breaks; a term whose token went back is refused once, and the
// shard is handed out again with a higher token; after a reconnection the
// shards held come again.
func TestShardTermsFollowTheStream(t *testing.T) {
	stub := newStubShards(t)
	c, err := fence.NewClient(stub.URL, fence.WithReconnectBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	terms, err := c.ShardTerms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer terms.Close()
	str := <-stub.streams

	str.out <- typedEvent(fence.EventAcquired, 0, 3) + typedEvent(fence.EventAcquired, 1, 5) + typedEvent(fence.EventDraining, 1, 5) +
		shardsState(held(0, 3, fence.ShardHeld), held(1, 5, fence.ShardDraining))
	t0 := nextTerm(t, terms)
	want := fence.ShardTermID{Group: "billing", Shards: 4, Shard: 0, TermID: fence.TermID{Token: 3, Holder: "a_1"}}
	if t0.ID() != want || t0.ID().Resource() != "billing/4/shard-0" || t0.Range().End != "0x0000000000000001" || t0.Err() != nil {
		t.Fatalf("first term %v (%v), range %v, err %v; want %v", t0.ID(), t0.ID().Resource(), t0.Range(), t0.Err(), want)
	}
	// A shard that drains before it was handed out comes over already, so
	// that the application acknowledges the drain.
	if d := nextTerm(t, terms); d.Shard() != 1 || d.Token() != 5 || !errors.Is(d.Err(), fence.ErrShardDraining) {
		t.Fatalf("second term %v, err %v; want shard 1 token 5 over with ErrShardDraining", d.ID(), d.Err())
	}

	renewed := held(0, 3, fence.ShardHeld)
	renewed.ValidUntil = time.Now().Add(2 * time.Hour)
	body, _ := json.Marshal(fence.ShardEventJSON{Event: fence.EventRenewed, ShardJSON: renewed})
	str.out <- "event: renewed\ndata: " + string(body) + "\n\n" // a renewal sends no state
	str.out <- typedEvent(fence.EventUndrained, 1, 5) + shardsState(held(0, 3, fence.ShardHeld), held(1, 5, fence.ShardHeld))
	t1 := nextTerm(t, terms) // the undrained shard: its term comes once it is held
	if t1.Shard() != 1 || t1.Token() != 5 {
		t.Fatalf("second term %v, want shard 1 token 5", t1.ID())
	}
	if !t0.ValidUntil().Equal(renewed.ValidUntil) || t0.Err() != nil {
		t.Fatalf("shard 0 after a renewal: valid until %v, err %v; want %v", t0.ValidUntil(), t0.Err(), renewed.ValidUntil)
	}

	str.out <- typedEvent(fence.EventDraining, 0, 3)
	endedWith(t, t0, fence.ErrShardDraining)
	// Shard 1 drains again, in the same term, after its undrain: reported again.
	str.out <- typedEvent(fence.EventDraining, 1, 5)
	endedWith(t, t1, fence.ErrShardDraining)
	str.out <- typedEvent(fence.EventUndrained, 1, 5) + shardsState(held(0, 3, fence.ShardDraining), held(1, 5, fence.ShardHeld))
	t1 = nextTerm(t, terms)
	if t1.Shard() != 1 || t1.Token() != 5 || t1.Err() != nil {
		t.Fatalf("after the second undrain: %v, %v; want shard 1 token 5 live", t1.ID(), t1.Err())
	}
	str.out <- shardsState(held(0, 3, fence.ShardDraining), held(1, 5, fence.ShardHeld)) +
		typedEvent(fence.EventReleased, 0, 3) + typedEvent(fence.EventLost, 1, 5)
	endedWith(t, t1, fence.ErrLeadershipLost)
	str.out <- shardsState()

	// Shard 1 comes back with a lower token: refused, reported once.
	str.out <- typedEvent(fence.EventAcquired, 1, 4) + shardsState(held(1, 4, fence.ShardHeld))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if term, err := terms.Next(ctx); !errors.Is(err, fence.ErrTokenRegressed) || term != nil {
		t.Fatalf("Next after token 4 of shard 1 followed 5: %v, %v; want ErrTokenRegressed", term, err)
	}
	str.out <- shardsState(held(1, 4, fence.ShardHeld)) // the same refused term: not reported again
	str.out <- typedEvent(fence.EventLost, 1, 4) + typedEvent(fence.EventAcquired, 1, 6) + shardsState(held(1, 6, fence.ShardHeld))
	t2 := nextTerm(t, terms)
	if t2.Shard() != 1 || t2.Token() != 6 {
		t.Fatalf("after the refused term: %v, want shard 1 token 6", t2.ID())
	}

	close(str.out) // the stream breaks
	endedWith(t, t2, fence.ErrDisconnected)
	str = <-stub.streams
	str.out <- typedEvent(fence.EventAcquired, 1, 6) + shardsState(held(1, 6, fence.ShardHeld))
	t3 := nextTerm(t, terms)
	if t3.ID() != t2.ID() || t3.Err() != nil {
		t.Fatalf("after reconnecting: %v (%v), want %v again", t3.ID(), t3.Err(), t2.ID())
	}
	terms.Close()
	endedWith(t, t3, fence.ErrTermClosed)
	if _, err := terms.Next(context.Background()); !errors.Is(err, fence.ErrTermClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

// A held shard replaced in the state by another token of the same shard
// ends the term (ErrLeadershipLost) even without a typed event, and a
// term's writes through the per-shard guard are refused once the next
// term of that shard has written.
func TestShardTermReplacedAndItsLateWriteRefused(t *testing.T) {
	stub := newStubShards(t)
	c, err := fence.NewClient(stub.URL)
	if err != nil {
		t.Fatal(err)
	}
	terms, err := c.ShardTerms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer terms.Close()
	str := <-stub.streams
	str.out <- shardsState(held(2, 7, fence.ShardHeld))
	old := nextTerm(t, terms)
	str.out <- shardsState(held(2, 8, fence.ShardHeld))
	endedWith(t, old, fence.ErrLeadershipLost)
	cur := nextTerm(t, terms)

	var g fence.MemoryGuard
	if err := g.DoShard(cur.ID(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := g.DoShard(old.ID(), func() error { return nil }); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the old term's late write: %v, want ErrStaleToken", err)
	}
}

// Client.Shards reads GET /shards, and refuses an answer it cannot use
// (ErrBadResponse): no group or identity, no shards, a held shard out of
// range or twice, without a token or validUntil, or in an unknown state.
func TestShardsDecodesAndRefusesUnusableAnswers(t *testing.T) {
	good := fence.ShardsJSON{Group: "billing", Identity: "a_1", Shards: 4, Members: []string{"a_1"}, FairShare: 4,
		Held: []fence.ShardJSON{held(1, 3, fence.ShardHeld), held(2, 4, fence.ShardDraining)}}
	bad := map[string]func(*fence.ShardsJSON){
		"no group":           func(s *fence.ShardsJSON) { s.Group = "" },
		"no identity":        func(s *fence.ShardsJSON) { s.Identity = "" },
		"no shards":          func(s *fence.ShardsJSON) { s.Shards = 0 },
		"shard out of range": func(s *fence.ShardsJSON) { s.Held[0].Shard = 4 },
		"shard held twice":   func(s *fence.ShardsJSON) { s.Held[1].Shard = 1 },
		"token 0":            func(s *fence.ShardsJSON) { s.Held[0].Token = 0 },
		"no validUntil":      func(s *fence.ShardsJSON) { s.Held[0].ValidUntil = time.Time{} },
		"unknown state":      func(s *fence.ShardsJSON) { s.Held[0].State = "owned" },
	}
	answer := func(st fence.ShardsJSON) *httptest.Server {
		body, _ := json.Marshal(st)
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/shards" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(body)
		}))
	}
	srv := answer(good)
	defer srv.Close()
	c, err := fence.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Shards(context.Background())
	if err != nil || got.Group != "billing" || len(got.Held) != 2 || got.Held[1].State != fence.ShardDraining || got.Held[0].Token != 3 {
		t.Fatalf("Shards = %+v, %v", got, err)
	}
	for name, spoil := range bad {
		t.Run(name, func(t *testing.T) {
			st := good
			st.Held = append([]fence.ShardJSON(nil), good.Held...)
			spoil(&st)
			srv := answer(st)
			defer srv.Close()
			c, err := fence.NewClient(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Shards(context.Background()); !errors.Is(err, fence.ErrBadResponse) {
				t.Fatalf("Shards = %v, want ErrBadResponse", err)
			}
		})
	}
}
