package sidecartest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// Shard mode's test settings: 8 shards; a newcomer is drained towards
// after 1s; a draining shard waits 10s for the app, far longer than a
// test's moves, so that moves are released by a ShardSampler's
// acknowledgement (POST /shards/{i}/drained), as an app's would be.
const TestShards = 8

// ShardArgs are the flags of the shard mode test settings.
func ShardArgs() []string {
	return []string{"--shards", strconv.Itoa(TestShards), "--shard-rebalance-delay", "1s", "--shard-drain-timeout", "10s"}
}

// Shards asks the sidecar GET /shards (shard mode).
func (p *Proc) Shards() (httpapi.ShardsJSON, error) {
	var out httpapi.ShardsJSON
	resp, err := Client.Get("http://" + p.addr + "/shards")
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /shards: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// ShardSampler asks every sampled sidecar's GET /shards as fast as it
// answers, logs each held shard's claim in that shard's ClaimLog, and
// acknowledges every draining shard it sees (POST /shards/{i}/drained),
// as the app would.
type ShardSampler struct {
	n      int
	logs   []ClaimLog
	mu     sync.Mutex
	latest map[*Sidecar]httpapi.ShardsJSON
	acked  map[[2]int64]bool // shard and token of each drain acknowledged
	wg     sync.WaitGroup
	stop   chan struct{}
}

// NewShardSampler samples a group of n shards.
func NewShardSampler(n int) *ShardSampler {
	return &ShardSampler{n: n, logs: make([]ClaimLog, n), latest: map[*Sidecar]httpapi.ShardsJSON{},
		acked: map[[2]int64]bool{}, stop: make(chan struct{})}
}

// Sample follows s until it exits or Check stops the sampler. Errors are
// not counted: a dying process may fail to answer, and a live one that
// does not answer fails AwaitSpread.
func (p *ShardSampler) Sample(s *Sidecar) {
	who := strconv.Itoa(s.Pid())
	p.wg.Go(func() {
		for {
			select {
			case <-p.stop:
				return
			case <-s.Done():
				p.mu.Lock()
				delete(p.latest, s)
				p.mu.Unlock()
				return
			default:
			}
			sent := time.Now()
			st, err := s.Shards()
			if err != nil {
				continue
			}
			answer := time.Now()
			for _, h := range st.Held {
				p.logs[h.Shard].Add(Claim{Who: who, Term: Term{Token: h.Token}, Sweep: -1, Sent: sent, Answer: answer})
				if h.State == "draining" && p.ack(s, h.Shard) {
					p.mu.Lock()
					p.acked[[2]int64{int64(h.Shard), h.Token}] = true
					p.mu.Unlock()
				}
			}
			p.mu.Lock()
			p.latest[s] = st
			p.mu.Unlock()
		}
	})
}

func (p *ShardSampler) ack(s *Sidecar, shard int) bool {
	resp, err := Client.Post("http://"+s.addr+"/shards/"+strconv.Itoa(shard)+"/drained", "", nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// holders is, per shard, the sidecars of live whose latest answer holds
// it, and its token there.
func (p *ShardSampler) holders(live []*Sidecar) (by [][]*Sidecar, tokens []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	by, tokens = make([][]*Sidecar, p.n), make([]int64, p.n)
	for _, s := range live {
		for _, h := range p.latest[s].Held {
			by[h.Shard] = append(by[h.Shard], s)
			tokens[h.Shard] = h.Token
		}
	}
	return by, tokens
}

// AwaitSpread waits until every shard is held by exactly one of live,
// with a token cond accepts, and none holds more than ceil(n/len(live));
// it returns each shard's holder and token. It fails t after within.
func (p *ShardSampler) AwaitSpread(t testing.TB, live []*Sidecar, within time.Duration, cond func(shard int, token int64) bool) ([]*Sidecar, []int64) {
	t.Helper()
	fair := (p.n + len(live) - 1) / len(live)
	deadline := time.Now().Add(within)
	for {
		by, tokens := p.holders(live)
		ok := true
		load := map[*Sidecar]int{}
		one := make([]*Sidecar, p.n)
		for i, hs := range by {
			if len(hs) != 1 || !cond(i, tokens[i]) {
				ok = false
				break
			}
			one[i] = hs[0]
			load[hs[0]]++
		}
		for _, c := range load {
			ok = ok && c <= fair
		}
		if ok {
			return one, tokens
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards not spread over %d sidecars (at most %d each) after %v: holders %v, tokens %v", len(live), fair, within, by, tokens)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// AnyToken accepts every token (AwaitSpread).
func AnyToken(int, int64) bool { return true }

// HigherThan accepts, on the shards of moved, only tokens above those of
// before (AwaitSpread).
func HigherThan(moved []int, before []int64) func(int, int64) bool {
	return func(i int, tok int64) bool { return !slices.Contains(moved, i) || tok > before[i] }
}

// HeldBy are the shards holders gives s.
func HeldBy(s *Sidecar, holders []*Sidecar) []int {
	var out []int
	for i, h := range holders {
		if h == s {
			out = append(out, i)
		}
	}
	return out
}

// Check stops the sampler and fails t if two sidecars ever claimed one
// shard at one instant (a claim of an older token sent after a newer
// token's first claim of that shard had arrived), or one token of a shard
// was claimed by two sidecars. It logs and returns the counts.
func (p *ShardSampler) Check(t testing.TB) (claims, overlaps, repeats int) {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	for i := range p.logs {
		n, longest := p.logs[i].Overlaps()
		if n > 0 {
			t.Errorf("shard %d: %d claims of an older token sent after a newer one had claimed (longest %v after)", i, n, longest)
		}
		overlaps += n
		who := map[int64]string{}
		for _, c := range p.logs[i].Claims() {
			claims++
			if w, ok := who[c.Term.Token]; ok && w != c.Who {
				repeats++
				t.Errorf("shard %d: token %d claimed by %s and by %s", i, c.Term.Token, w, c.Who)
			}
			who[c.Term.Token] = c.Who
		}
	}
	t.Logf("sampler: %d claims, %d overlapping, %d tokens repeated with another holder, %d drains acknowledged",
		claims, overlaps, repeats, len(p.acked))
	return claims, overlaps, repeats
}

// IdentityOfShards is the identity a sidecar in shard mode answers with
// on GET /shards, failing t if it cannot answer.
func IdentityOfShards(t testing.TB, s *Sidecar) string {
	t.Helper()
	st, err := s.Shards()
	if err != nil {
		t.Fatal(err)
	}
	return st.Identity
}
