package process

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// Shard mode's test settings: 8 shards; a newcomer is drained towards
// after 1s; a draining shard waits 10s for the app, far longer than the
// test's moves, so that every move below is released by the sampler's
// acknowledgement (POST /shards/{i}/drained), as an app's would be.
const testShards = 8

func shardArgs() []string {
	return []string{"--shards", strconv.Itoa(testShards), "--shard-rebalance-delay", "1s", "--shard-drain-timeout", "10s"}
}

// shardSampler asks every replica's GET /shards as fast as it answers,
// logs each held shard's claim in that shard's ClaimLog, and acknowledges
// every draining shard it sees, as the app would.
type shardSampler struct {
	logs   [testShards]sidecartest.ClaimLog
	mu     sync.Mutex
	latest map[*sidecartest.Sidecar]httpapi.ShardsJSON
	acked  map[[2]int64]bool // shard and token of each drain acknowledged
	wg     sync.WaitGroup
	stop   chan struct{}
}

func newShardSampler() *shardSampler {
	return &shardSampler{latest: map[*sidecartest.Sidecar]httpapi.ShardsJSON{}, acked: map[[2]int64]bool{}, stop: make(chan struct{})}
}

func getShards(s *sidecartest.Sidecar) (httpapi.ShardsJSON, error) {
	var out httpapi.ShardsJSON
	resp, err := sidecartest.Client.Get("http://" + s.Addr() + "/shards")
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /shards: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// sample follows s until s is gone or the sampler stops.
func (p *shardSampler) sample(t *testing.T, s *sidecartest.Sidecar) {
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
			st, err := getShards(s)
			if err != nil {
				continue // the process may be dying; a live one is checked by the awaits
			}
			answer := time.Now()
			for _, h := range st.Held {
				p.logs[h.Shard].Add(sidecartest.Claim{Who: who, Term: sidecartest.Term{Token: h.Token}, Sweep: -1, Sent: sent, Answer: answer})
				if h.State == "draining" {
					resp, err := sidecartest.Client.Post("http://"+s.Addr()+"/shards/"+strconv.Itoa(h.Shard)+"/drained", "", nil)
					if err == nil {
						if resp.StatusCode == http.StatusOK {
							p.mu.Lock()
							p.acked[[2]int64{int64(h.Shard), h.Token}] = true
							p.mu.Unlock()
						}
						resp.Body.Close()
					}
				}
			}
			p.mu.Lock()
			p.latest[s] = st
			p.mu.Unlock()
		}
	})
}

// holders is, per shard, the replicas whose latest answer holds it, with
// the token.
func (p *shardSampler) holders(live []*sidecartest.Sidecar) (by [testShards][]*sidecartest.Sidecar, tokens [testShards]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range live {
		for _, h := range p.latest[s].Held {
			by[h.Shard] = append(by[h.Shard], s)
			tokens[h.Shard] = h.Token
		}
	}
	return by, tokens
}

// awaitSpread waits until every shard is held by exactly one of live and
// none holds more than ceil(8/len(live)), and returns the holders.
func (p *shardSampler) awaitSpread(t *testing.T, live []*sidecartest.Sidecar, within time.Duration, cond func(shard int, tok int64) bool) ([testShards]*sidecartest.Sidecar, [testShards]int64) {
	t.Helper()
	fair := (testShards + len(live) - 1) / len(live)
	deadline := time.Now().Add(within)
	for {
		by, tokens := p.holders(live)
		ok := true
		load := map[*sidecartest.Sidecar]int{}
		var one [testShards]*sidecartest.Sidecar
		for i, hs := range by {
			if len(hs) != 1 || !cond(i, tokens[i]) {
				ok = false
				break
			}
			one[i] = hs[0]
			load[hs[0]]++
		}
		for _, n := range load {
			ok = ok && n <= fair
		}
		if ok {
			return one, tokens
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards not spread over %d replicas (at most %d each) after %v: holders %v, tokens %v", len(live), fair, within, by, tokens)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check fails t if two replicas ever claimed one shard at one instant (a
// claim of an older token sent after a newer token's first claim
// arrived), or one token was claimed by two replicas; it returns the
// claims logged.
func (p *shardSampler) check(t *testing.T) (claims int) {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	overlaps, repeats := 0, 0
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
	t.Logf("sampler: %d claims, %d overlapping, %d tokens repeated with another holder, %d drains acknowledged", claims, overlaps, repeats, len(p.acked))
	return claims
}

func heldBy(s *sidecartest.Sidecar, holders [testShards]*sidecartest.Sidecar) []int {
	var out []int
	for i, h := range holders {
		if h == s {
			out = append(out, i)
		}
	}
	return out
}

// TestShardGroupOnOneSQLiteFile runs 3 sidecar processes in shard mode
// on one SQLite file, with every replica's /shards sampled throughout:
// the 8 shards spread over them, each held once, at most 3 each; after a
// kill -9 of one, its shards are held again by the others, with higher
// tokens, once its claims expire; after a SIGTERM of another, the last
// one holds every shard within a few retry periods, the leaver having
// exited 0. No shard is ever claimed by two replicas at one instant.
func TestShardGroupOnOneSQLiteFile(t *testing.T) {
	db := sidecartest.DBPath(t)
	p := newShardSampler()
	var live []*sidecartest.Sidecar
	for range 3 {
		live = append(live, sidecartest.Launch(t, db, shardArgs()...))
	}
	start := time.Now()
	for _, s := range live {
		s.WaitServing()
		p.sample(t, s)
	}
	any := func(int, int64) bool { return true }
	holders, tokens := p.awaitSpread(t, live, 20*time.Second, any)
	t.Logf("8 shards spread over 3 replicas %v after start", time.Since(start).Round(time.Millisecond))

	victim := live[0]
	lost := heldBy(victim, holders)
	before := tokens
	killed := time.Now()
	if err := victim.Cmd().Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.WaitExit(5 * time.Second)
	live = live[1:]
	higher := func(i int, tok int64) bool { return !contains(lost, i) || tok > before[i] }
	holders, tokens = p.awaitSpread(t, live, sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second, higher)
	took := time.Since(killed)
	t.Logf("kill -9: shards %v held again after %v (lease %v)", lost, took.Round(time.Millisecond), sidecartest.LeaseDuration)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval {
		t.Errorf("the killed replica's shards were held again after %v, before its claims could have expired", took)
	}

	leaver := live[0]
	moved := heldBy(leaver, holders)
	before = tokens
	stopped := time.Now()
	leaver.Signal(syscall.SIGTERM)
	live = live[1:]
	higher = func(i int, tok int64) bool { return !contains(moved, i) || tok > before[i] }
	p.awaitSpread(t, live, 6*sidecartest.RetryPeriod, higher)
	t.Logf("SIGTERM: shards %v moved after %v", moved, time.Since(stopped).Round(time.Millisecond))
	if code := leaver.WaitExit(5 * time.Second); code != 0 {
		t.Errorf("the replica stopped with SIGTERM exited %d, want 0", code)
	}
	p.check(t)
	checkRows(t, db, live[0], leaver, victim)
}

// checkRows reads the file: a row per shard, a member row per replica;
// the one that left has no holder, the killed one still names itself, the
// last one's names itself.
func checkRows(t *testing.T, db string, last, left, killed *sidecartest.Sidecar) {
	t.Helper()
	all, err := sqlite.ReadAll(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, s := range all {
		holder[s.Election] = s.Record.HolderIdentity
	}
	for i := range testShards {
		if _, ok := holder[shardgroup.ShardRecord("leader-sidecar", i)]; !ok {
			t.Errorf("no row of shard %d in %v", i, holder)
		}
	}
	for _, c := range []struct {
		s    *sidecartest.Sidecar
		want func(id string) string
	}{
		{last, func(id string) string { return id }},
		{killed, func(id string) string { return id }},
		{left, func(string) string { return "" }},
	} {
		id := identityIn(t, c.s)
		if got, ok := holder[shardgroup.MemberRecord("leader-sidecar", id)]; !ok || got != c.want(id) {
			t.Errorf("member row of %s: holder %q (present %v), want %q", id, got, ok, c.want(id))
		}
	}
	if len(all) != testShards+3 {
		t.Errorf("%d rows, want %d shards and 3 members", len(all), testShards)
	}
}

// identityIn is the identity s logged at start.
func identityIn(t *testing.T, s *sidecartest.Sidecar) string {
	t.Helper()
	for line := range strings.SplitSeq(s.Logs(), "\n") {
		var l struct{ Msg, Identity string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "starting" {
			return l.Identity
		}
	}
	t.Fatalf("sidecar %d logged no identity", s.Pid())
	return ""
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestShardsPageCommand runs the command docs/shards.md shows, on a file
// of the test's own: a sidecar alone in group billing holds its 8 shards.
func TestShardsPageCommand(t *testing.T) {
	lines := docLines(docBlocks(t, "shards.md"), "sidecar ")
	if len(lines) != 1 {
		t.Fatalf("docs/shards.md shows %d sidecar commands, want 1: %q", len(lines), lines)
	}
	args := strings.Fields(strings.TrimPrefix(lines[0], "sidecar "))
	for i, a := range args {
		if a == "--sqlite-path" && i+1 < len(args) {
			args[i+1] = sidecartest.DBPath(t)
		}
	}
	s := sidecartest.Spawn(t, nil, args...)
	s.WaitServing()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := getShards(s)
		if err == nil && st.Group == "billing" && st.Shards == 8 && len(st.Held) == 8 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /shards: %+v, %v; want group billing holding its 8 shards", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
