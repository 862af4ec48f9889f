package sidecartest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
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
	noAcks bool
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

// WithoutAcks makes the sampler leave drains to the application: it
// acknowledges none.
func (p *ShardSampler) WithoutAcks() *ShardSampler {
	p.noAcks = true
	return p
}

// Sample follows s until it exits or Check stops the sampler. Errors are
// not counted: a dying process may fail to answer, and a live one that
// does not answer fails AwaitSpread.
func (p *ShardSampler) Sample(s *Sidecar) {
	who := strconv.Itoa(s.Pid())
	followShards(&p.wg, p.stop, s, func() {
		p.mu.Lock()
		delete(p.latest, s)
		p.mu.Unlock()
	}, func(st httpapi.ShardsJSON, sent, answer time.Time) {
		for _, h := range st.Held {
			p.logs[h.Shard].Add(Claim{Who: who, Term: Term{Token: h.Token}, Sweep: -1, Sent: sent, Answer: answer})
			if h.State == "draining" && !p.noAcks && p.ack(s, h.Shard) {
				p.mu.Lock()
				p.acked[[2]int64{int64(h.Shard), h.Token}] = true
				p.mu.Unlock()
			}
		}
		p.mu.Lock()
		p.latest[s] = st
		p.mu.Unlock()
	})
}

// followShards asks s for GET /shards as fast as it answers, on a
// goroutine of wg, and gives each answer to answered with the instants its
// request was sent and its answer came; a request that fails is not
// counted (a dying process may fail to answer). It calls gone once s has
// exited, and stops then or when stop closes.
func followShards(wg *sync.WaitGroup, stop <-chan struct{}, s *Sidecar, gone func(), answered func(st httpapi.ShardsJSON, sent, answer time.Time)) {
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-s.Done():
				gone()
				return
			default:
			}
			sent := time.Now()
			st, err := s.Shards()
			if err != nil {
				continue
			}
			answered(st, sent, time.Now())
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

// ShardsEvent is one Server-Sent Event of GET /shards/watch: Name is ""
// for a state (ShardsJSON), else the typed event's name
// (fence.ShardEventJSON).
type ShardsEvent struct{ Name, Data string }

// ShardsWatch is one open GET /shards/watch, read in the background until
// the stream ends or its test ends.
type ShardsWatch struct {
	mu     sync.Mutex
	events []ShardsEvent
	ended  chan struct{}
}

// WatchShards opens GET /shards/watch on s, failing t if it cannot.
func (s *Sidecar) WatchShards(t testing.TB) *ShardsWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/shards/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /shards/watch: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET /shards/watch: %s", resp.Status)
	}
	w := &ShardsWatch{ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev ShardsEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Data != "" {
					w.mu.Lock()
					w.events = append(w.events, ev)
					w.mu.Unlock()
				}
				ev = ShardsEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-w.ended })
	return w
}

// Events are the events read so far.
func (w *ShardsWatch) Events() []ShardsEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// Ended is closed once the stream has ended.
func (w *ShardsWatch) Ended() <-chan struct{} { return w.ended }

// ReplayShardEvents applies the named events, in order, to the shards
// held (nothing at first), and returns an error unless every state holds
// exactly what the events before it say, token and state alike, and every
// event is one the shards held allow (acquired for a shard not held;
// draining, undrained, renewed, released, lost for the term held). It
// returns the named events but renewed.
func ReplayShardEvents(evs []ShardsEvent) ([]fence.ShardEventJSON, error) {
	model := map[int]fence.ShardJSON{}
	var named []fence.ShardEventJSON
	for _, ev := range evs {
		if ev.Name == "" {
			var st httpapi.ShardsJSON
			if err := json.Unmarshal([]byte(ev.Data), &st); err != nil {
				return named, err
			}
			ok := len(st.Held) == len(model)
			for _, h := range st.Held {
				m := model[h.Shard]
				ok = ok && m.Token == h.Token && m.State == h.State
			}
			if !ok {
				return named, fmt.Errorf("state %+v after events that hold %+v", st.Held, model)
			}
			continue
		}
		var e fence.ShardEventJSON
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return named, err
		}
		m, had := model[e.Shard]
		var ok bool
		switch e.Event {
		case fence.EventAcquired:
			ok = !had && e.State == fence.ShardHeld && e.Token >= 1
		case fence.EventDraining:
			ok = had && m.Token == e.Token && m.State == fence.ShardHeld && e.State == fence.ShardDraining
		case fence.EventUndrained:
			ok = had && m.Token == e.Token && m.State == fence.ShardDraining && e.State == fence.ShardHeld
		case fence.EventRenewed:
			ok = had && m.Token == e.Token && m.State == e.State && e.ValidUntil.After(m.ValidUntil)
		case fence.EventReleased, fence.EventLost:
			ok = had && m.Token == e.Token && e.State == e.Event
		}
		if !ok || e.Event != ev.Name {
			return named, fmt.Errorf("event %s %s while holding %+v", ev.Name, ev.Data, model)
		}
		if e.Event == fence.EventReleased || e.Event == fence.EventLost {
			delete(model, e.Shard)
		} else {
			model[e.Shard] = e.ShardJSON
		}
		if e.Event != fence.EventRenewed {
			named = append(named, e)
		}
	}
	return named, nil
}
