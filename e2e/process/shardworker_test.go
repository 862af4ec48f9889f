package process

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// shardWorkerEvent is one JSON line of examples/worker --shards.
type shardWorkerEvent struct {
	Event, Holder, Error string
	Shard                int
	Token                int64
	Accepted, Stale      bool
}

// shardWorker is one running examples/worker --shards.
type shardWorker = sidecartest.Worker[shardWorkerEvent]

// startShardWorker starts the worker binary in shard mode with args.
func startShardWorker(t *testing.T, binary string, args ...string) *shardWorker {
	t.Helper()
	return sidecartest.StartWorker[shardWorkerEvent](t, binary, append([]string{"--shards"}, args...)...)
}

// shardWrites returns the write events w printed so far.
func shardWrites(w *shardWorker) []shardWorkerEvent {
	var out []shardWorkerEvent
	for _, e := range w.Events() {
		if e.Event == "write" {
			out = append(out, e)
		}
	}
	return out
}

// replica is a sidecar in shard mode and the worker next to it.
type replica struct {
	sidecar *sidecartest.Sidecar
	worker  *shardWorker
}

func (r replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	r.worker.Signal(t, sig)
	r.sidecar.Signal(sig)
}

// TestShardWorkersFenceEveryShard runs 3 replicas (a sidecar in shard mode
// on one SQLite file and examples/worker --shards next to it, all workers
// writing one results file) over 8 shards, through a SIGSTOP of one
// replica past the lease and its SIGCONT, a kill -9 of another, and a
// SIGTERM of the third's sidecar (its worker acknowledges each drain).
// Every write goes through the per-shard guard. In the log of accepted
// writes, in commit order, no write of a shard follows a newer term of
// that shard: zero stale writes accepted. The paused replica's worker
// woke in the middle of jobs of terms that had moved: those late writes
// were refused, and the test counts them, so it would see a guard that
// let them through.
func TestShardWorkersFenceEveryShard(t *testing.T) {
	t.Parallel()
	worker := sidecartest.Build(t, "examples/worker") // before the clock starts
	began := time.Now()
	db := sidecartest.DBPath(t)
	results := strings.TrimSuffix(db, "election.db") + "results.db"
	p := sidecartest.NewShardSampler(testShards).WithoutAcks()
	var all []replica
	for range 3 {
		all = append(all, replica{sidecar: sidecartest.Launch(t, db, sidecartest.ShardArgs()...)})
	}
	for i, name := range []string{"a", "b", "c"} {
		all[i].sidecar.WaitServing()
		p.Sample(all[i].sidecar)
		all[i].worker = startShardWorker(t, worker, "--sidecar", "http://"+all[i].sidecar.Addr(), "--db", results,
			"--name", name, "--interval", "10ms", "--work-delay", "400ms")
	}
	sidecars := func(rs ...replica) []*sidecartest.Sidecar {
		var out []*sidecartest.Sidecar
		for _, r := range rs {
			out = append(out, r.sidecar)
		}
		return out
	}
	holders, tokens := p.AwaitSpread(t, sidecars(all...), 20*time.Second, sidecartest.AnyToken)
	awaitWritten(t, results, tokens, 10*time.Second)
	t.Logf("8 shards spread over 3 replicas and written %v after start", time.Since(began).Round(time.Millisecond))

	// SIGSTOP: a's shards move once its claims expire; its worker wakes in
	// the middle of jobs of terms that are over.
	paused := all[0]
	moved := sidecartest.HeldBy(paused.sidecar, holders)
	before := tokens
	pausedAt := time.Now()
	pauseOutsideWrites(t, paused, db, results)
	holders, tokens = p.AwaitSpread(t, sidecars(all[1:]...), sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second,
		sidecartest.HigherThan(moved, before))
	awaitWritten(t, results, tokens, 10*time.Second)
	wokeAt := time.Now()
	paused.worker.Signal(t, syscall.SIGCONT)
	paused.sidecar.Signal(syscall.SIGCONT)
	late := awaitLateWritesRefused(t, paused.worker, moved, before, 5*time.Second)
	t.Logf("SIGSTOP of the holder of shards %v: held and written by the others after %v; %d late writes of its old terms refused",
		moved, wokeAt.Sub(pausedAt).Round(time.Millisecond), late)

	// kill -9 of b, sidecar and worker.
	victim := all[1]
	lost := sidecartest.HeldBy(victim.sidecar, holders)
	before = tokens
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	victim.sidecar.WaitExit(5 * time.Second)
	live := []replica{all[0], all[2]}
	_, tokens = p.AwaitSpread(t, sidecars(live...), sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second,
		sidecartest.HigherThan(lost, before))
	t.Logf("kill -9: shards %v held again after %v", lost, time.Since(killed).Round(time.Millisecond))
	holders, _ = p.AwaitSpread(t, sidecars(live...), 20*time.Second, sidecartest.AnyToken)

	// SIGTERM of c's sidecar: its worker stops each shard's jobs and
	// acknowledges the drain; the shards move to a.
	leaver := all[2]
	movedOnStop := sidecartest.HeldBy(leaver.sidecar, holders)
	_, before = p.AwaitSpread(t, sidecars(live...), 20*time.Second, sidecartest.AnyToken)
	stopped := time.Now()
	leaver.sidecar.Signal(syscall.SIGTERM)
	_, tokens = p.AwaitSpread(t, sidecars(all[0]), 8*sidecartest.RetryPeriod+time.Second, sidecartest.HigherThan(movedOnStop, before))
	t.Logf("SIGTERM: shards %v drained by the worker and moved after %v", movedOnStop, time.Since(stopped).Round(time.Millisecond))
	if code := leaver.sidecar.WaitExit(5 * time.Second); code != 0 {
		t.Errorf("the sidecar stopped with SIGTERM exited %d, want 0", code)
	}
	awaitWritten(t, results, tokens, 10*time.Second)
	drained := 0
	for _, e := range leaver.worker.Events() {
		if e.Event == "drained" && slices.Contains(movedOnStop, e.Shard) {
			drained++
		}
	}
	if drained < len(movedOnStop) {
		t.Errorf("the leaver's worker acknowledged %d drains of shards %v, want each", drained, movedOnStop)
	}
	for _, r := range []replica{all[0], all[2]} {
		r.worker.Signal(t, syscall.SIGTERM)
	}

	p.Check(t)
	writes, err := sidecartest.ReadShardWrites(t.Context(), results)
	if err != nil {
		t.Fatal(err)
	}
	stale, last := sidecartest.StaleShardWritesAccepted(writes)
	if stale != 0 {
		t.Errorf("%d stale writes accepted by the guard", stale)
	}
	if len(last) != testShards {
		t.Errorf("writes on %d shards, want %d", len(last), testShards)
	}
	refused := 0
	for _, r := range all {
		for _, e := range shardWrites(r.worker) {
			if !e.Accepted && e.Stale {
				refused++
			}
		}
	}
	t.Logf("%d writes accepted over %d shards, %d stale writes accepted, %d refused as stale (%d late ones of the paused replica); %v from the start",
		len(writes), len(last), stale, refused, late, time.Since(began).Round(time.Millisecond))
}

// awaitWritten waits until the workers' log of accepted writes has a
// write of every shard with at least its token in tokens.
func awaitWritten(t *testing.T, results string, tokens []int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		writes, err := sidecartest.ReadShardWrites(t.Context(), results) // no table before the workers made it
		_, last := sidecartest.StaleShardWritesAccepted(writes)
		missing := []int{}
		for i, tok := range tokens {
			if w, ok := last[shardResource(i)]; !ok || w.Token < tok {
				missing = append(missing, i)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no accepted write with the current token on shards %v after %v (tokens %v; reading: %v)", missing, within, tokens, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func shardResource(i int) string {
	return fence.ShardResource("leader-sidecar", testShards, i)
}

// awaitLateWritesRefused waits until w has logged a refused write (stale)
// of a term of moved whose token was before, and returns how many it
// logged. It fails t if w had an accepted write of such a term after the
// shard moved, or if none was refused within.
func awaitLateWritesRefused(t *testing.T, w *shardWorker, moved []int, before []int64, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := 0
		for _, e := range shardWrites(w) {
			if slices.Contains(moved, e.Shard) && e.Token == before[e.Shard] && !e.Accepted && e.Stale {
				n++
			}
		}
		if n > 0 {
			time.Sleep(500 * time.Millisecond) // the other shards' jobs, woken at the same time
			n = 0
			for _, e := range shardWrites(w) {
				if slices.Contains(moved, e.Shard) && e.Token == before[e.Shard] && !e.Accepted && e.Stale {
					n++
				}
			}
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paused worker logged no refused write of its old terms %v within %v of waking", before, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pauseOutsideWrites stops r's sidecar and worker (SIGSTOP) at an instant
// when neither holds a write lock on a file of the election database or
// the results database (sidecartest.StopOutsideWrites).
func pauseOutsideWrites(t *testing.T, r replica, files ...string) {
	t.Helper()
	sidecartest.StopOutsideWrites(t,
		func() { r.signal(t, syscall.SIGSTOP) }, func() { r.signal(t, syscall.SIGCONT) },
		[]int{r.sidecar.Pid(), r.worker.Pid()}, files...)
}
