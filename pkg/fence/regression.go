package fence

import (
	"errors"
	"fmt"
	"sync"
)

// delivered is what a Client remembers of the terms it has handed out, so
// that it never hands out one that does not follow them.
type delivered struct {
	mu       sync.Mutex
	highest  TermID // the highest term delivered; zero before the first
	reported TermID // the last refused term WaitForLeadership returned
}

// regression is the error of a term refused because it does not follow
// the highest term delivered.
type regression struct{ got, after TermID }

func (r *regression) Error() string {
	return fmt.Sprintf("%v: the sidecar leads with %v, after this client delivered %v", ErrTokenRegressed, r.got, r.after)
}

func (r *regression) Is(target error) bool { return target == ErrTokenRegressed }

// admit checks a state from the sidecar before it is delivered. A leader
// state whose term follows the highest delivered (a higher token, or the
// same term renewed) raises the highest and passes. Any other leader state
// becomes a not-leader state whose Err says which term came after which.
func (c *Client) admit(s State) State {
	if !s.Leader {
		return s
	}
	term := s.TermID()
	c.delivered.mu.Lock()
	defer c.delivered.mu.Unlock()
	if highest := c.delivered.highest; highest.Token > 0 && !term.follows(highest) {
		return State{Identity: s.Identity, Holder: s.Holder, Lease: s.Lease, Backend: s.Backend,
			Err: &regression{got: term, after: highest}}
	}
	c.delivered.highest = term
	return s
}

// firstReport reports whether err is a refused term that WaitForLeadership
// has not returned yet, and records it as returned.
func (c *Client) firstReport(err error) bool {
	var r *regression
	if !errors.As(err, &r) {
		return false
	}
	c.delivered.mu.Lock()
	defer c.delivered.mu.Unlock()
	if c.delivered.reported == r.got {
		return false
	}
	c.delivered.reported = r.got
	return true
}

// shardsDelivered is what a Client remembers of the shard terms it has
// handed out, per shard resource, so that it never hands out one that
// does not follow them.
type shardsDelivered struct {
	mu       sync.Mutex
	highest  map[string]TermID // by ShardResource
	reported map[string]TermID // the last refused term Next returned
}

// admitShard checks a shard term before it is handed out: one that follows
// the highest handed out for its shard raises it and passes (nil); any
// other returns the regression.
func (c *Client) admitShard(id ShardTermID) error {
	d := &c.shards
	d.mu.Lock()
	defer d.mu.Unlock()
	if highest, ok := d.highest[id.Resource()]; ok && !id.TermID.follows(highest) {
		return fmt.Errorf("shard %d of %q: %w", id.Shard, shortName(id.Group), &regression{got: id.TermID, after: highest})
	}
	if d.highest == nil {
		d.highest = map[string]TermID{}
	}
	d.highest[id.Resource()] = id.TermID
	return nil
}

// firstShardReport reports whether the refused term id was not reported
// yet, and records it as reported.
func (c *Client) firstShardReport(id ShardTermID) bool {
	d := &c.shards
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reported[id.Resource()] == id.TermID {
		return false
	}
	if d.reported == nil {
		d.reported = map[string]TermID{}
	}
	d.reported[id.Resource()] = id.TermID
	return true
}
