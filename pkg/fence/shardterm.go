package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ShardResource is the resource name under which the guards fence the
// data of shard i of a group of shards shards: "<group>/<shards>/shard-<i>".
// Every writer of a shard's data must present its term under this one
// name (ShardTermID.Resource), so that each shard has its own last
// accepted term, as it has its own election. The count is in the name:
// shard i of N and the shards of another count that cover the same keys
// are other elections, whose tokens are not comparable with its own, so
// an application that mixed counts would see its writes of one count
// fenced under another resource than the other's, never ordered by one
// (the sidecars keep the counts apart; see docs/shards.md).
func ShardResource(group string, shards, shard int) string {
	return group + "/" + strconv.Itoa(shards) + "/shard-" + strconv.Itoa(shard)
}

// ShardTermID names one term of one shard of a shard group: the group,
// its count, the shard, and the term (the shard's token and the identity of the
// sidecar that holds it). It is what a write of the shard's data presents
// to a guard: MemoryGuard.DoShard, SQLGuard.CheckShard. Each shard's token
// rises with each of its terms, independently of the other shards', so a
// token says nothing outside its shard.
type ShardTermID struct {
	// Group names the shard group ("group" of GET /shards).
	Group string
	// Shards is the group's number of shards ("shards" of GET /shards).
	Shards int
	// Shard is the shard's number, from 0.
	Shard int
	TermID
}

// Resource is ShardResource(id.Group, id.Shards, id.Shard).
func (id ShardTermID) Resource() string { return ShardResource(id.Group, id.Shards, id.Shard) }

// String returns the term for messages, e.g.
// `shard 3 of 8 of "billing": token 7 of "web-1_4f2a"`.
func (id ShardTermID) String() string {
	return fmt.Sprintf("shard %d of %d of %q: %v", id.Shard, id.Shards, shortName(id.Group), id.TermID)
}

// check returns an error wrapping ErrInvalidToken if id cannot be
// accepted by a guard.
func (id ShardTermID) check() error {
	switch {
	case id.Group == "":
		return fmt.Errorf("%w: shard %d's term %v names no group", ErrInvalidToken, id.Shard, id.TermID)
	case id.Shards < 1:
		return fmt.Errorf("%w: shard %d's term %v names no shard count", ErrInvalidToken, id.Shard, id.TermID)
	case id.Shard < 0 || id.Shard >= id.Shards:
		return fmt.Errorf("%w: shard %d is not one of the group's %d", ErrInvalidToken, id.Shard, id.Shards)
	}
	return id.TermID.check()
}

// ErrShardDraining is the cause of a ShardTerm ended because the sidecar
// asks the application to let the shard go: stop working on it, then call
// Client.Drained.
var ErrShardDraining = errors.New("fence: shard draining")

// ShardTerm is one term of one shard held by this replica, from
// ShardTerms.Next. Attach ID to every write of the shard's data; stop
// starting work on the shard once Err is not nil. The guards, not the
// ShardTerm, are what make a late write harmless.
type ShardTerm struct {
	id     ShardTermID
	rng    RangeJSON
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	validUntil time.Time
	lapse      *time.Timer // ends the term at validUntil
}

func newShardTerm(parent context.Context, id ShardTermID, h ShardJSON) *ShardTerm {
	ctx, cancel := context.WithCancelCause(parent)
	t := &ShardTerm{id: id, rng: h.Range, ctx: ctx, cancel: cancel, validUntil: h.ValidUntil}
	t.mu.Lock() // the timer may fire at once, and end reads it
	t.lapse = time.AfterFunc(time.Until(h.ValidUntil), t.endIfLapsed)
	t.mu.Unlock()
	return t
}

// ID is what the term's writes present to a guard.
func (t *ShardTerm) ID() ShardTermID { return t.id }

// Shard is the shard's number.
func (t *ShardTerm) Shard() int { return t.id.Shard }

// Token is the shard's fencing token in this term (>= 1).
func (t *ShardTerm) Token() int64 { return t.id.Token }

// Range is the shard's range of FNV-1a 64 hashes of keys.
func (t *ShardTerm) Range() RangeJSON { return t.rng }

// ValidUntil is when the term lapses unless the sidecar renews it; each
// renewal the sidecar reports moves it later.
func (t *ShardTerm) ValidUntil() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.validUntil
}

// Context is cancelled when the term is over: the shard drains
// (ErrShardDraining), the sidecar reports it released, lost, or held in
// another term (ErrLeadershipLost), the stream to the sidecar breaks
// (ErrDisconnected), ValidUntil passes without a renewal
// (ErrLeadershipExpired), Close is called (ErrTermClosed), or the
// ShardTerms it came from is closed or its context done. context.Cause
// tells which. Like Term's, Context, Done and Err compare the clock with
// ValidUntil first, so a process paused past ValidUntil sees the expiry on
// its first call after waking.
func (t *ShardTerm) Context() context.Context {
	t.endIfLapsed()
	return t.ctx
}

// Done is closed when the term is over; see Context.
func (t *ShardTerm) Done() <-chan struct{} {
	t.endIfLapsed()
	return t.ctx.Done()
}

// Err is nil while the term lasts, then why it ended; see Context.
func (t *ShardTerm) Err() error {
	t.endIfLapsed()
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// Close ends the term if it is not over yet. It is safe to call more than
// once.
func (t *ShardTerm) Close() { t.end(ErrTermClosed) }

func (t *ShardTerm) end(cause error) {
	t.cancel(cause)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lapse.Stop()
}

// endIfLapsed ends the term if the clock has reached ValidUntil.
func (t *ShardTerm) endIfLapsed() {
	if t.ctx.Err() != nil {
		return
	}
	if until := t.ValidUntil(); !time.Now().Before(until) {
		t.end(expired(until))
	}
}

// renew moves ValidUntil to until, if later.
func (t *ShardTerm) renew(until time.Time) {
	t.mu.Lock()
	if !until.After(t.validUntil) {
		t.mu.Unlock()
		return
	}
	t.validUntil = until
	t.lapse.Reset(time.Until(until))
	t.mu.Unlock()
}

// ShardTerms follows the sidecar's GET /shards/watch and hands out a
// ShardTerm for each term of a shard this replica begins to hold; see
// Client.ShardTerms.
type ShardTerms struct {
	c      *Client
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the follower has returned

	mu    sync.Mutex
	queue []shardNext
	ready chan struct{} // closed and replaced when queue grows

	// Owned by the follower goroutine: the terms handed out and not
	// ended by the stream, the token of each shard's drain reported,
	// and the group, identity and count of the last state.
	current         map[int]*ShardTerm
	drained         map[int]int64
	group, identity string
	shards          int
}

type shardNext struct {
	term *ShardTerm
	err  error
}

// ShardTerms follows GET /shards/watch (shard mode) until ctx is done or
// Close is called. Next returns each term of a shard that this replica
// begins to hold, once; each renewed event moves its ValidUntil; the term
// ends (its Context is cancelled) the moment the stream says the shard
// drains, was released or lost, or holds it in another term, when the
// term lapses by the clock (no renewal reported in time), or when the
// stream breaks. A term that lapsed here while the sidecar kept renewing
// it comes again as a new ShardTerm (the same ShardTermID). Every drain
// is reported once per term: if no live ShardTerm of it is out (it lapsed,
// the stream broke, or the shard drained before it was handed out), Next
// returns one already over with ErrShardDraining, so that the application
// acknowledges every drain (Client.Drained) and the shard moves at once. A stream that breaks is reconnected with backoff; the
// shards held then come again as new ShardTerms (the same ShardTermID if
// the term is the same).
//
// A held shard whose term does not follow the highest this Client has
// handed out for that shard (a lower token, or the same token with another
// identity: a replaced or reset store) is not handed out: Next returns an
// error wrapping ErrTokenRegressed that names both terms, once per such
// term, and the shard is handed out again once its token passes the
// highest. It returns an error if the first connection fails.
func (c *Client) ShardTerms(ctx context.Context) (*ShardTerms, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	s, err := c.open(fctx, "/shards/watch")
	if err != nil {
		cancel(nil)
		return nil, err
	}
	st := &ShardTerms{c: c, ctx: fctx, cancel: cancel, done: make(chan struct{}), ready: make(chan struct{}),
		current: map[int]*ShardTerm{}, drained: map[int]int64{}}
	go st.follow(s)
	return st, nil
}

// Next blocks until this replica begins a term of a shard and returns it,
// or returns an error wrapping ErrTokenRegressed (see ShardTerms), or the
// cause once ctx is done or the ShardTerms is closed.
func (s *ShardTerms) Next(ctx context.Context) (*ShardTerm, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			n := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return n.term, n.err
		}
		ready := s.ready
		s.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("fence: waiting for a shard: %w", context.Cause(ctx))
		case <-s.ctx.Done():
			return nil, fmt.Errorf("fence: waiting for a shard: %w", context.Cause(s.ctx))
		}
	}
}

// Close stops following the sidecar and ends every term it handed out
// that is not over yet (ErrTermClosed). It is safe to call more than once.
func (s *ShardTerms) Close() {
	s.cancel(ErrTermClosed)
	<-s.done
}

func (s *ShardTerms) push(n shardNext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, n)
	close(s.ready)
	s.ready = make(chan struct{})
}

// follow reads streams until the ShardTerms ends; s is the first, open.
func (s *ShardTerms) follow(first *stream) {
	defer close(s.done)
	c := s.c
	backoff := c.backoffMin
	str := first
	for {
		var err error
		if str == nil {
			str, err = c.open(s.ctx, "/shards/watch")
		}
		if str != nil {
			var delivered bool
			delivered, err = s.run(str)
			str = nil
			if delivered {
				backoff = c.backoffMin
			}
		}
		if s.ctx.Err() != nil {
			s.endAll(context.Cause(s.ctx))
			return
		}
		s.endAll(fmt.Errorf("%w: %w", ErrDisconnected, err))
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
		case <-s.ctx.Done():
			wait.Stop()
			return
		}
		backoff = min(2*backoff, c.backoffMax)
	}
}

// endAll ends every current term with cause.
func (s *ShardTerms) endAll(cause error) {
	for i, t := range s.current {
		t.end(cause)
		delete(s.current, i)
	}
}

// run reads str until it ends; it reports whether any state came and why
// the stream ended.
func (s *ShardTerms) run(str *stream) (delivered bool, err error) {
	defer func() {
		str.idle.Stop()
		str.body.Close()
		str.cancel(nil)
	}()
	err = readEvents(str.body, func() { str.idle.Reset(s.c.idle) }, func(name string, data []byte) error {
		if name != "" {
			return s.typed(name, data)
		}
		st, err := decodeShards(data)
		if err != nil {
			return err
		}
		s.state(st)
		delivered = true
		return nil
	})
	if cause := context.Cause(str.ctx); cause != nil && s.ctx.Err() == nil {
		err = cause
	}
	return delivered, err
}

// typed renews the current term a renewed event names (a term that
// lapsed meanwhile comes again as a new ShardTerm), ends the one a typed
// event says is over, with the cause it names, and reports a drain.
// Events of other terms, and acquired and undrained (the state that
// follows hands the term out), change nothing.
func (s *ShardTerms) typed(name string, data []byte) error {
	var e ShardEventJSON
	if err := json.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("%w: event %q: %v", ErrBadResponse, name, err)
	}
	switch name {
	case EventDraining:
		s.drain(e.Shard, e.Token)
		return nil
	case EventUndrained:
		delete(s.drained, e.Shard)
		return nil
	}
	t, ok := s.current[e.Shard]
	if !ok || t.id.Token != e.Token {
		return nil
	}
	switch name {
	case EventRenewed:
		if t.ctx.Err() != nil && e.State == ShardHeld && s.identity != "" {
			delete(s.current, e.Shard)
			s.handOut(e.ShardJSON)
			return nil
		}
		t.renew(e.ValidUntil)
	case EventReleased, EventLost:
		t.end(fmt.Errorf("%w: the sidecar reports shard %d %s (token %d)", ErrLeadershipLost, e.Shard, name, e.Token))
		delete(s.current, e.Shard)
	}
	return nil
}

// drain reports, once per term, that shard drains in the term of token:
// the current term ends with ErrShardDraining, or, if this ShardTerms has
// no live term of it (its term lapsed or the stream broke before, or the
// shard drained before it was handed out), Next returns a ShardTerm
// already over with ErrShardDraining, so that the application
// acknowledges the drain all the same.
func (s *ShardTerms) drain(shard int, token int64) {
	if s.drained[shard] == token || s.identity == "" { // before the first state: the state reports it
		return
	}
	s.drained[shard] = token
	cause := fmt.Errorf("%w: shard %d, token %d", ErrShardDraining, shard, token)
	if t, ok := s.current[shard]; ok && t.id.Token == token && t.ctx.Err() == nil {
		t.end(cause)
		delete(s.current, shard)
		return
	}
	delete(s.current, shard)
	id := ShardTermID{Group: s.group, Shards: s.shards, Shard: shard, TermID: TermID{Token: token, Holder: s.identity}}
	t := newShardTerm(s.ctx, id, ShardJSON{Shard: shard, Token: token, ValidUntil: time.Now()})
	t.end(cause)
	s.push(shardNext{term: t})
}

// handOut hands out a new term of h if it follows the highest handed out
// for its shard, else reports the regression once.
func (s *ShardTerms) handOut(h ShardJSON) {
	if !time.Now().Before(h.ValidUntil) {
		return
	}
	id := ShardTermID{Group: s.group, Shards: s.shards, Shard: h.Shard, TermID: TermID{Token: h.Token, Holder: s.identity}}
	if err := s.c.admitShard(id); err != nil {
		if s.c.firstShardReport(id) {
			s.push(shardNext{err: err})
		}
		return
	}
	t := newShardTerm(s.ctx, id, h)
	s.current[h.Shard] = t
	s.push(shardNext{term: t})
}

// state brings the current terms in line with st: a term no longer held
// as it was ends; a renewal moves ValidUntil; a shard that drains is
// reported (drain); a shard newly held, or held again after its term here
// lapsed, is handed out (handOut).
func (s *ShardTerms) state(st ShardsJSON) {
	s.group, s.shards, s.identity = st.Group, st.Shards, st.Identity
	held := make(map[int]ShardJSON, len(st.Held))
	for _, h := range st.Held {
		held[h.Shard] = h
	}
	for i, t := range s.current {
		h, ok := held[i]
		switch {
		case ok && h.Token == t.id.Token && t.id.Holder == st.Identity && t.id.Group == st.Group && h.State == ShardHeld:
			if t.ctx.Err() == nil || !time.Now().Before(h.ValidUntil) {
				t.renew(h.ValidUntil)
				continue
			}
			// Lapsed here, yet renewed by the sidecar: handed out again below.
		case ok && h.Token == t.id.Token && h.State == ShardDraining:
			continue // drain, below
		case ok:
			t.end(fmt.Errorf("%w: shard %d's %v replaced by token %d of %q", ErrLeadershipLost, i, t.id.TermID, h.Token, shortName(st.Identity)))
		default:
			t.end(fmt.Errorf("%w: the sidecar no longer holds shard %d (token %d)", ErrLeadershipLost, i, t.id.Token))
		}
		delete(s.current, i)
	}
	for _, h := range st.Held {
		if h.State == ShardDraining {
			s.drain(h.Shard, h.Token)
			continue
		}
		delete(s.drained, h.Shard) // held, not draining: a later drain is reported again
		if _, ok := s.current[h.Shard]; !ok {
			s.handOut(h)
		}
	}
}
