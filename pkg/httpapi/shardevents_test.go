package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

func heldShard(i int, token int64, state string) ShardJSON {
	r, _ := shard.RangeOf(i, 4)
	return ShardJSON{Shard: i, Token: token, State: state, Range: rangeJSON(r)}
}

func later(h ShardJSON) ShardJSON {
	h.ValidUntil = h.ValidUntil.Add(time.Second)
	return h
}

func (e eventList) String() string {
	var b strings.Builder
	for _, ev := range e {
		fmt.Fprintf(&b, "%s %d:%d:%s; ", ev.Event, ev.Shard, ev.Token, ev.State)
	}
	return b.String()
}

type eventList []ShardEventJSON

// Each rule of shardEvents, row by row.
func TestShardEvents(t *testing.T) {
	const held, draining = fence.ShardHeld, fence.ShardDraining
	none := func(int) int64 { return 0 }
	releasedToken := func(token int64) func(int) int64 { return func(int) int64 { return token } }
	for _, c := range []struct {
		name       string
		prev, next []ShardJSON
		released   func(int) int64
		want       string
	}{
		{"the first state counts from nothing held", nil,
			[]ShardJSON{heldShard(0, 1, held), heldShard(2, 4, draining)}, none,
			"acquired 0:1:held; acquired 2:4:held; draining 2:4:draining; "},
		{"nothing changed", []ShardJSON{heldShard(1, 3, held)}, []ShardJSON{heldShard(1, 3, held)}, none, ""},
		{"a renewal", []ShardJSON{heldShard(1, 3, draining)}, []ShardJSON{later(heldShard(1, 3, draining))}, none, "renewed 1:3:draining; "},
		{"a drain", []ShardJSON{heldShard(1, 3, held)}, []ShardJSON{heldShard(1, 3, draining)}, none, "draining 1:3:draining; "},
		{"a drain undone", []ShardJSON{heldShard(1, 3, draining)}, []ShardJSON{heldShard(1, 3, held)}, none, "undrained 1:3:held; "},
		{"a release of this term", []ShardJSON{heldShard(1, 3, draining)}, nil, releasedToken(3), "released 1:3:released; "},
		{"a term that ended unreleased is lost", []ShardJSON{heldShard(1, 3, held)}, nil, releasedToken(2), "lost 1:3:lost; "},
		{"a new term: the old one ends first", []ShardJSON{heldShard(1, 3, held)}, []ShardJSON{heldShard(1, 5, held)}, none,
			"lost 1:3:lost; acquired 1:5:held; "},
		{"by shard number", []ShardJSON{heldShard(0, 1, held), heldShard(3, 1, held)},
			[]ShardJSON{heldShard(1, 2, held), heldShard(3, 1, draining)}, none,
			"lost 0:1:lost; acquired 1:2:held; draining 3:1:draining; "},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := eventList(shardEvents(c.prev, c.next, c.released)).String(); got != c.want {
				t.Errorf("events %q, want %q", got, c.want)
			}
		})
	}
}

// replayShardEvents applies the stream's named events, in order, to the
// shards held, and checks that each state (unnamed event) holds exactly
// what the events before it say, token, state and validUntil alike. It
// returns the named events but renewed.
func replayShardEvents(t *testing.T, evs []sseEvent) eventList {
	t.Helper()
	model := map[int]ShardJSON{}
	var named eventList
	for _, ev := range evs {
		if ev.name == "" {
			var st ShardsJSON
			if err := json.Unmarshal([]byte(ev.data), &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Held) != len(model) {
				t.Fatalf("state %s after events that hold %v", heldStates(st), model)
			}
			for _, h := range st.Held {
				if m := model[h.Shard]; m.Token != h.Token || m.State != h.State || !m.ValidUntil.Equal(h.ValidUntil) {
					t.Fatalf("state %s after events that hold %v", heldStates(st), model)
				}
			}
			continue
		}
		var e ShardEventJSON
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		if e.Event != ev.name {
			t.Fatalf("event %q carries %q", ev.name, ev.data)
		}
		if r, _ := shard.RangeOf(e.Shard, 4); e.Range != rangeJSON(r) {
			t.Fatalf("event %q: range %v, want %v", ev.data, e.Range, rangeJSON(r))
		}
		m, had := model[e.Shard]
		switch e.Event {
		case fence.EventAcquired:
			if had || e.State != fence.ShardHeld || e.Token < 1 {
				t.Fatalf("%q while holding %v", ev.data, model)
			}
			model[e.Shard] = e.ShardJSON
		case fence.EventDraining, fence.EventUndrained:
			from := map[string]string{fence.EventDraining: fence.ShardHeld, fence.EventUndrained: fence.ShardDraining}[e.Event]
			if !had || m.Token != e.Token || m.State != from {
				t.Fatalf("%q while holding %v", ev.data, model)
			}
			model[e.Shard] = e.ShardJSON
		case fence.EventRenewed:
			if !had || m.Token != e.Token || m.State != e.State || !e.ValidUntil.After(m.ValidUntil) {
				t.Fatalf("%q while holding %v", ev.data, model)
			}
			model[e.Shard] = e.ShardJSON
		case fence.EventReleased, fence.EventLost:
			if !had || m.Token != e.Token || e.State != e.Event {
				t.Fatalf("%q while holding %v", ev.data, model)
			}
			delete(model, e.Shard)
		default:
			t.Fatalf("unknown event %q", ev.name)
		}
		if e.Event != fence.EventRenewed {
			named = append(named, e)
		}
	}
	return named
}

// TestShardsWatchTypedEvents follows GET /shards/watch of a real group:
// acquired for its 4 shards, draining for the 2 a newcomer is to take,
// released for the one the app acknowledged and for the one whose drain
// timed out, and lost for the 2 it still held when the store failed and
// their claims lapsed; renewed for every renewal between. Replayed in
// order, the named events give exactly the shards of every state sent
// after them, validUntil included.
func TestShardsWatchTypedEvents(t *testing.T) {
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
		// Each shard's elector acquires on its own schedule: the states
		// sent may hold them in any order, each state's events by shard.
		first := replayShardEvents(t, rec.all())
		slices.SortFunc(first, func(a, b ShardEventJSON) int { return a.Shard - b.Shard })
		got := first.String()
		if want := "acquired 0:1:held; acquired 1:1:held; acquired 2:1:held; acquired 3:1:held; "; got != want {
			t.Fatalf("events after 2s: %q, want %q", got, want)
		}

		runGroup(t, store, "b")
		time.Sleep(time.Second + 2*500*time.Millisecond)
		var draining []int
		for _, e := range replayShardEvents(t, rec.all()) {
			if e.Event == fence.EventDraining {
				draining = append(draining, e.Shard)
			}
		}
		if len(draining) != 2 {
			t.Fatalf("events after b joined: %v; want 2 shards draining", replayShardEvents(t, rec.all()))
		}
		acked, timedOut := draining[0], draining[1]
		if code := call(t, h, "POST", "/shards/"+strconv.Itoa(acked)+"/drained", nil); code != 200 {
			t.Fatalf("POST /shards/%d/drained: %d", acked, code)
		}
		time.Sleep(6 * time.Second) // the drain timeout is 5s
		var kept []int
		for i := range 4 {
			if !slices.Contains(draining, i) {
				kept = append(kept, i)
			}
		}

		store.SetError(errors.New("store down"))
		time.Sleep(3 * time.Second) // the renew deadline is 2s
		named := replayShardEvents(t, rec.all())
		var ends []string
		for _, e := range named[4:] {
			if e.Event != fence.EventDraining {
				ends = append(ends, fmt.Sprintf("%s %d:%d", e.Event, e.Shard, e.Token))
			}
		}
		if len(ends) == 4 {
			slices.Sort(ends[2:]) // each claim lapses at its own validUntil
		}
		want := []string{fmt.Sprintf("released %d:1", acked), fmt.Sprintf("released %d:1", timedOut),
			fmt.Sprintf("lost %d:1", kept[0]), fmt.Sprintf("lost %d:1", kept[1])}
		if !slices.Equal(ends, want) {
			t.Errorf("after the drains and the store's failure: %q, want %q (all events: %v)", ends, want, named)
		}
		renewals := 0
		for _, ev := range rec.all() {
			if ev.name == fence.EventRenewed {
				renewals++
			}
		}
		// Renewals every second: 4 shards for 3s and more, then 2 for 6s.
		if renewals < 4*3+2*6 {
			t.Errorf("%d renewed events, want one per renewal (%d or more)", renewals, 4*3+2*6)
		}
		if states := rec.events(t); len(states[len(states)-1].Held) != 0 {
			t.Errorf("the last state holds %s, want nothing", heldStates(states[len(states)-1]))
		}
		store.SetError(nil)
		cancel()
		<-done
	})
}
