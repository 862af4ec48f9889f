package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// The API of shard mode (--shards N): the app asks which shards this
// replica holds, with their tokens and key ranges, and acknowledges a
// drain. Every answer is computed from memory (shardgroup.Group.Status),
// never by a request to the store.
//
//	GET  /shards              ShardsJSON: the group and the shards held here
//	GET  /shards/{i}          200 ShardJSON while held here, 409 with the holder otherwise
//	GET  /shards/owner?key=K  OwnerJSON: the shard of key K and its holder
//	GET  /shards/watch        Server-Sent Events: ShardsJSON at once, then on
//	                          every change but a renewal, each state preceded
//	                          by a named event per shard whose term changed
//	                          (acquired, draining, undrained, released, lost),
//	                          and a renewed event per renewal
//	POST /shards/{i}/drained  the app let shard i go: it is released at once
//	                          (409 when it does not drain here); with
//	                          ?token=N, only if N is the token of the term
//	                          that drains (409 for another term, 400 for a
//	                          token that is not a number >= 1); without it,
//	                          whichever term drains
//
// The single election's /leader paths answer 409 with an error that
// points to /shards.

// ShardGroup is what the shard API reads and drives;
// *shardgroup.Group implements it.
type ShardGroup interface {
	Status() shardgroup.Status
	Shard(i int) (shardgroup.ShardStatus, error)
	Drained(i int, token int64) error
	Healthy() bool
	ReachedStore() bool
	Changed() <-chan struct{}
}

// ShardsJSON is the answer of GET /shards; ShardJSON a shard held here;
// RangeJSON a shard's range; ShardEventJSON a typed event of
// /shards/watch. They are defined once, in package fence, which
// applications read them with.
type (
	ShardsJSON     = fence.ShardsJSON
	ShardJSON      = fence.ShardJSON
	RangeJSON      = fence.RangeJSON
	ShardEventJSON = fence.ShardEventJSON
)

// OwnerJSON is the answer of GET /shards/owner.
type OwnerJSON struct {
	Key   string    `json:"key"`
	Shard int       `json:"shard"`
	Range RangeJSON `json:"range"`
	// Holder is the holder the shard's record names as this replica last
	// saw it; "" for none.
	Holder string `json:"holder"`
	// HeldHere is set while this replica claims the shard; Token is then
	// its token.
	HeldHere bool  `json:"heldHere"`
	Token    int64 `json:"token,omitempty"`
}

// ShardErrorJSON is the body of a refusal.
type ShardErrorJSON struct {
	Shard  *int   `json:"shard,omitempty"`
	Holder string `json:"holder,omitempty"`
	Error  string `json:"error"`
}

type shardAPI struct {
	g    ShardGroup
	opts Options
}

// NewShardsAppHandler returns the app API of shard mode.
func NewShardsAppHandler(g ShardGroup, opts Options) http.Handler {
	a := &shardAPI{g: g, opts: opts.withDefaults()}
	mux := a.readOnly()
	mux.HandleFunc("GET /shards", a.shards)
	mux.HandleFunc("GET /shards/owner", a.owner)
	mux.HandleFunc("GET /shards/watch", a.watch)
	mux.HandleFunc("GET /shards/{i}", a.shard)
	mux.Handle("POST /shards/{i}/drained", localOnly(http.HandlerFunc(a.drained), a.opts.AnyHost))
	for _, p := range []string{"GET /{$}", "GET /leader", "GET /leader/watch", "POST /leader/release", "POST /leader/handoff"} {
		mux.HandleFunc(p, a.noLeader)
	}
	return mux
}

// NewShardsOpsHandler returns the read-only probes of shard mode, and
// /metrics when Options.Metrics is set.
func NewShardsOpsHandler(g ShardGroup, opts Options) http.Handler {
	a := &shardAPI{g: g, opts: opts.withDefaults()}
	return a.readOnly()
}

func (a *shardAPI) readOnly() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /leader/ready", a.noLeader)
	if a.opts.Metrics != nil {
		mux.Handle("GET /metrics", a.opts.Metrics)
	}
	return mux
}

// NoLeaderError is the error every single-leader path answers in shard
// mode.
const NoLeaderError = "this sidecar runs a shard group (--shards): there is no single leader; " +
	"GET /shards lists the shards held here with their tokens"

func (a *shardAPI) noLeader(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusConflict, ShardErrorJSON{Error: NoLeaderError})
}

func (a *shardAPI) healthz(w http.ResponseWriter, _ *http.Request) {
	if a.g.Healthy() {
		writeText(w, http.StatusOK, "ok")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "a shard's election loop is wedged: no attempt finished recently")
}

func (a *shardAPI) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case !a.g.Healthy():
		writeText(w, http.StatusServiceUnavailable, "a shard's election loop is wedged: no attempt finished recently")
	case !a.g.ReachedStore():
		writeText(w, http.StatusServiceUnavailable, "store not reached yet")
	default:
		writeText(w, http.StatusOK, "ok")
	}
}

func rangeJSON(r shard.Range) RangeJSON { return RangeJSON{Start: r.StartText(), End: r.EndText()} }

func (a *shardAPI) shards(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, shardsJSON(a.g.Status()))
}

func shardsJSON(s shardgroup.Status) ShardsJSON {
	out := ShardsJSON{Group: s.Group, Identity: s.Identity, Shards: s.Shards, Members: s.Members,
		FairShare: s.FairShare, Leaving: s.Leaving, Held: []ShardJSON{}}
	if out.Members == nil {
		out.Members = []string{}
	}
	var ranges []shard.Range
	for _, h := range s.Held {
		out.Held = append(out.Held, heldJSON(h.Shard, h.Token, h.Draining, h.Range, h.ValidUntil))
		ranges = append(ranges, h.Range)
	}
	if sel, ok := shard.Selector(shard.FieldUID, ranges); ok {
		out.ShardSelector = sel
	}
	return out
}

// watch streams the group as Server-Sent Events: ShardsJSON (unnamed
// events) at once, then on each change of members, held shards, tokens or
// states; a renewal alone (validUntil) sends no state, only a renewed
// event. Before each state it sends a named event per shard whose term
// here changed since the last events sent (shardEvents), the first state
// counting from nothing held.
// Besides the group's changes it wakes when the earliest claim's
// validUntil passes, which no store event announces.
func (a *shardAPI) watch(w http.ResponseWriter, r *http.Request) {
	rc := startEventStream(w)

	keepAlive := time.NewTicker(a.opts.KeepAlive)
	defer keepAlive.Stop()
	lapse := time.NewTimer(0)
	defer lapse.Stop()
	var last []byte      // the last state sent, without validUntil
	var sent []ShardJSON // the shards held as the events sent so far say
	for {
		changed := a.g.Changed() // before Status, so no change is missed
		s := a.g.Status()
		st := shardsJSON(s)
		body, err := json.Marshal(st)
		if err != nil {
			return
		}
		key, err := json.Marshal(withoutValidUntil(st))
		if err != nil {
			return
		}
		events := shardEvents(sent, st.Held, a.released)
		for _, ev := range events {
			data, err := json.Marshal(ev)
			if err != nil {
				return
			}
			if !send(rc, w, a.opts.writeTimeout, "event: %s\ndata: %s\n\n", ev.Event, data) {
				return
			}
		}
		if string(key) != string(last) {
			if !send(rc, w, a.opts.writeTimeout, "data: %s\n\n", body) {
				return
			}
			last = key
		}
		sent = st.Held
		var lapsed <-chan time.Time
		if len(s.Held) > 0 {
			first := s.Held[0].ValidUntil
			for _, h := range s.Held {
				if h.ValidUntil.Before(first) {
					first = h.ValidUntil
				}
			}
			lapse.Reset(time.Until(first))
			lapsed = lapse.C
		}
		if !awaitNext(rc, w, r, a.opts, changed, lapsed, keepAlive.C) {
			return
		}
	}
}

// withoutValidUntil is st with every held shard's validUntil zeroed: what
// tells a change from a renewal.
func withoutValidUntil(st ShardsJSON) ShardsJSON {
	held := make([]ShardJSON, len(st.Held))
	for i, h := range st.Held {
		h.ValidUntil = time.Time{}
		held[i] = h
	}
	st.Held = held
	return st
}

// released is the token of the last term of shard i this replica
// released (0 if none, or i is not a shard).
func (a *shardAPI) released(i int) int64 {
	st, err := a.g.Shard(i)
	if err != nil {
		return 0
	}
	return st.Released
}

func heldJSON(i int, token int64, draining bool, r shard.Range, validUntil time.Time) ShardJSON {
	state := fence.ShardHeld
	if draining {
		state = fence.ShardDraining
	}
	return ShardJSON{Shard: i, Token: token, State: state, Range: rangeJSON(r), ValidUntil: validUntil}
}

// shardNumber reads {i}; on a bad one it answers and returns false.
func (a *shardAPI) shardNumber(w http.ResponseWriter, r *http.Request) (int, bool) {
	raw := r.PathValue("i")
	i, err := strconv.Atoi(raw)
	n := a.g.Status().Shards
	if err != nil || i < 0 || i >= n {
		writeJSON(w, http.StatusNotFound, ShardErrorJSON{Error: fmt.Sprintf("no shard %q: the group has shards 0 to %d", raw, n-1)})
		return 0, false
	}
	return i, true
}

func (a *shardAPI) shard(w http.ResponseWriter, r *http.Request) {
	i, ok := a.shardNumber(w, r)
	if !ok {
		return
	}
	st, err := a.g.Shard(i)
	if err != nil {
		writeJSON(w, http.StatusNotFound, ShardErrorJSON{Shard: &i, Error: err.Error()})
		return
	}
	if !st.Held {
		msg := "not held here"
		if st.Holder != "" {
			msg += "; held by " + st.Holder
		}
		writeJSON(w, http.StatusConflict, ShardErrorJSON{Shard: &i, Holder: st.Holder, Error: msg})
		return
	}
	s := a.g.Status()
	rng, _ := shard.RangeOf(i, s.Shards)
	var validUntil time.Time
	for _, h := range s.Held {
		if h.Shard == i {
			validUntil = h.ValidUntil
		}
	}
	writeJSON(w, http.StatusOK, heldJSON(i, st.Token, st.Draining, rng, validUntil))
}

func (a *shardAPI) owner(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("key") {
		writeJSON(w, http.StatusBadRequest, ShardErrorJSON{Error: "the query must name a key: /shards/owner?key=<key>"})
		return
	}
	key := q.Get("key")
	n := a.g.Status().Shards
	i := shard.OfKey(key, n)
	st, err := a.g.Shard(i)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, ShardErrorJSON{Shard: &i, Error: err.Error()})
		return
	}
	rng, _ := shard.RangeOf(i, n)
	out := OwnerJSON{Key: key, Shard: i, Range: rangeJSON(rng), Holder: st.Holder, HeldHere: st.Held}
	if st.Held {
		out.Token = st.Token
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *shardAPI) drained(w http.ResponseWriter, r *http.Request) {
	i, ok := a.shardNumber(w, r)
	if !ok {
		return
	}
	var token int64
	if r.URL.Query().Has("token") {
		text := r.URL.Query().Get("token")
		t, err := strconv.ParseInt(text, 10, 64)
		if err != nil || t < 1 {
			writeJSON(w, http.StatusBadRequest, ShardErrorJSON{Shard: &i,
				Error: fmt.Sprintf("token %q: the token of the term that drains, a whole number >= 1, or no token at all", text)})
			return
		}
		token = t
	}
	err := a.g.Drained(i, token)
	switch {
	case errors.Is(err, shardgroup.ErrNotDraining), errors.Is(err, shardgroup.ErrOtherTerm):
		writeJSON(w, http.StatusConflict, ShardErrorJSON{Shard: &i, Error: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusNotFound, ShardErrorJSON{Shard: &i, Error: err.Error()})
	default:
		writeJSON(w, http.StatusOK, struct {
			Shard int    `json:"shard"`
			State string `json:"state"`
		}{i, "drained"})
	}
}
