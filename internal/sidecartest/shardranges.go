package sidecartest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// RangeTerms are the terms of shards that replicas were seen to claim
// (replica, count, shard, token), whatever their shard counts, each with
// its key range. A term is one contiguous claim, so a replica certainly
// claimed it from the answer of its first claim seen to the request of its
// last one. Overlaps counts the pairs of terms of two replicas whose key
// ranges intersect and that were both certainly claimed at one instant:
// the keys two replicas worked on at once. Safe for concurrent use.
type RangeTerms struct {
	mu    sync.Mutex
	terms map[rangeTermKey]*rangeTerm
}

type rangeTermKey struct {
	who          string
	count, shard int
	token        int64
}

type rangeTerm struct {
	first, last uint64 // the range [first, last], inclusive
	// from is the answer of the first claim, to the request of the last.
	from, to time.Time
	rng      fence.RangeJSON
}

// NewRangeTerms returns an empty record of terms.
func NewRangeTerms() *RangeTerms { return &RangeTerms{terms: map[rangeTermKey]*rangeTerm{}} }

// Add takes in the claims of the answer st of replica who to a GET
// /shards sent at sent and answered at answered. A range that cannot be
// read is an error.
func (r *RangeTerms) Add(who string, st fence.ShardsJSON, sent, answered time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range st.Held {
		k := rangeTermKey{who: who, count: st.Shards, shard: h.Shard, token: h.Token}
		if t, ok := r.terms[k]; ok {
			t.to = sent
			continue
		}
		first, last, err := parseRange(h.Range)
		if err != nil {
			return fmt.Errorf("shard %d of %d: %w", h.Shard, st.Shards, err)
		}
		r.terms[k] = &rangeTerm{first: first, last: last, from: answered, to: sent, rng: h.Range}
	}
	return nil
}

// Counts are the shard counts of the terms seen, each with its number of
// terms.
func (r *RangeTerms) Counts() map[int]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]int{}
	for k := range r.terms {
		out[k.count]++
	}
	return out
}

// Overlaps fails t for every two terms of two replicas that claimed
// intersecting key ranges at one instant, and returns the terms seen and
// the overlaps.
func (r *RangeTerms) Overlaps(t testing.TB) (terms, overlaps int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []rangeTermKey
	for k := range r.terms {
		keys = append(keys, k)
	}
	for i, a := range keys {
		for _, b := range keys[i+1:] {
			ta, tb := r.terms[a], r.terms[b]
			if a.who == b.who || ta.first > tb.last || tb.first > ta.last {
				continue
			}
			from, to := later(ta.from, tb.from), earlier(ta.to, tb.to)
			if from.After(to) {
				continue
			}
			overlaps++
			t.Errorf("keys held twice for %v: replica %s held shard %d of %d (token %d, keys [%s, %s)) and replica %s shard %d of %d (token %d, keys [%s, %s))",
				to.Sub(from).Round(time.Millisecond), a.who, a.shard, a.count, a.token, ta.rng.Start, ta.rng.End, b.who, b.shard, b.count, b.token, tb.rng.Start, tb.rng.End)
		}
	}
	return len(keys), overlaps
}

// RangeSampler asks every sampled sidecar's GET /shards as fast as it
// answers, whatever its shard count, and keeps every term it sees claimed
// (RangeTerms). It acknowledges every draining shard it sees, as the app
// would.
type RangeSampler struct {
	terms  *RangeTerms
	mu     sync.Mutex
	latest map[*Sidecar]fence.ShardsJSON
	acked  int
	wg     sync.WaitGroup
	stop   chan struct{}
}

// NewRangeSampler returns a sampler that samples nothing yet.
func NewRangeSampler() *RangeSampler {
	return &RangeSampler{terms: NewRangeTerms(), latest: map[*Sidecar]fence.ShardsJSON{}, stop: make(chan struct{})}
}

// Sample follows s until it exits or Check stops the sampler.
func (p *RangeSampler) Sample(s *Sidecar) {
	who := strconv.Itoa(s.Pid())
	followShards(&p.wg, p.stop, s, func() {
		p.mu.Lock()
		delete(p.latest, s)
		p.mu.Unlock()
	}, func(st fence.ShardsJSON, sent, answer time.Time) {
		if err := p.terms.Add(who, st, sent, answer); err != nil {
			panic(err)
		}
		p.mu.Lock()
		p.latest[s] = st
		p.mu.Unlock()
		for _, h := range st.Held {
			if h.State == fence.ShardDraining && ackDrain(s, h.Shard, h.Token) {
				p.mu.Lock()
				p.acked++
				p.mu.Unlock()
			}
		}
	})
}

// ackDrain acknowledges the drain of the shard's term.
func ackDrain(s *Sidecar, shard int, token int64) bool {
	resp, err := Client.Post(fmt.Sprintf("http://%s/shards/%d/drained?token=%d", s.addr, shard, token), "", nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// parseRange reads a RangeJSON as the inclusive range [first, last].
func parseRange(r fence.RangeJSON) (first, last uint64, err error) {
	first, err = strconv.ParseUint(strings.TrimPrefix(r.Start, "0x"), 16, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("range start %q: %w", r.Start, err)
	}
	if r.End == "0x10000000000000000" {
		return first, 1<<64 - 1, nil
	}
	end, err := strconv.ParseUint(strings.TrimPrefix(r.End, "0x"), 16, 64)
	if err != nil || end <= first {
		return 0, 0, fmt.Errorf("range end %q after start %q: %v", r.End, r.Start, err)
	}
	return first, end - 1, nil
}

// AwaitHeld waits until every shard of a group of count shards is held by
// exactly one of live, as their latest answers say, and returns how long
// it waited. It fails t after within.
func (p *RangeSampler) AwaitHeld(t testing.TB, live []*Sidecar, count int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		holders := make([]int, count)
		p.mu.Lock()
		for _, s := range live {
			st := p.latest[s]
			if st.Shards != count {
				continue
			}
			for _, h := range st.Held {
				holders[h.Shard]++
			}
		}
		p.mu.Unlock()
		ok := true
		for _, n := range holders {
			ok = ok && n == 1
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("the %d shards are not each held once by the %d replicas after %v: holders per shard %v", count, len(live), within, holders)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Held is how many shards s claims in its latest answer.
func (p *RangeSampler) Held(s *Sidecar) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.latest[s].Held)
}

// Check stops the sampler and fails t for every two terms of two
// sidecars that claimed intersecting key ranges at one instant
// (RangeTerms.Overlaps). It logs and returns the terms seen and the
// overlaps.
func (p *RangeSampler) Check(t testing.TB) (terms, overlaps int) {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	terms, overlaps = p.terms.Overlaps(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("range sampler: %d terms, %d pairs held the same keys at once, %d acknowledgements of a drain answered 200", terms, overlaps, p.acked)
	return terms, overlaps
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ShardCountArgs are the shard mode test settings (ShardArgs) with count
// shards.
func ShardCountArgs(count int) []string {
	return []string{"--shards", strconv.Itoa(count), "--shard-rebalance-delay", "1s", "--shard-drain-timeout", "10s"}
}

// CountChange is a rolling update of a group's shard count: two replicas
// of the old count hold every shard; a replica of the new count joins and
// both counts run side by side for Mix; then the old replicas stop
// (SIGTERM), and the new one must hold every shard of its count within
// Within. Every replica is sampled by a RangeSampler throughout: no key
// may be held by two replicas at one instant.
type CountChange struct {
	From, To int
	// Spawn starts a sidecar with the given extra flags.
	Spawn       func(t testing.TB, extra ...string) *Sidecar
	Mix, Within time.Duration
}

// Run plays the rolling update and fails t on an overlap, a replica that
// exits other than 0, or shards not held in time.
func (c CountChange) Run(t testing.TB) {
	t.Helper()
	p := NewRangeSampler()
	var old []*Sidecar
	for range 2 {
		s := c.Spawn(t, ShardCountArgs(c.From)...)
		s.WaitServing()
		p.Sample(s)
		old = append(old, s)
	}
	took := p.AwaitHeld(t, old, c.From, 20*time.Second)
	t.Logf("%d shards held by the 2 replicas of count %d after %v", c.From, c.From, took.Round(time.Millisecond))
	joined := time.Now()
	newer := c.Spawn(t, ShardCountArgs(c.To)...)
	newer.WaitServing()
	p.Sample(newer)
	time.Sleep(c.Mix)
	t.Logf("after %v of both counts side by side the replica of count %d holds %d shards, those of count %d hold %d and %d",
		time.Since(joined).Round(time.Millisecond), c.To, p.Held(newer), c.From, p.Held(old[0]), p.Held(old[1]))
	stopped := time.Now()
	for _, s := range old {
		s.Signal(syscall.SIGTERM)
	}
	for _, s := range old {
		if code := s.WaitExit(10 * time.Second); code != 0 {
			t.Errorf("a replica of count %d stopped with SIGTERM exited %d, want 0", c.From, code)
		}
	}
	p.AwaitHeld(t, []*Sidecar{newer}, c.To, c.Within)
	t.Logf("every shard of count %d held by the new replica %v after the old ones were told to stop", c.To, time.Since(stopped).Round(time.Millisecond))
	p.Check(t)
}
