package process

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

const testShards = sidecartest.TestShards

// TestShardGroupOnOneSQLiteFile runs 3 sidecar processes in shard mode
// on one SQLite file, with every replica's /shards sampled throughout:
// the 8 shards spread over them, each held once, at most 3 each; after a
// kill -9 of one, its shards are held again by the others, with higher
// tokens, once its claims expire; after a SIGTERM of another, the last
// one holds every shard within a few retry periods, the leaver having
// exited 0. No shard is ever claimed by two replicas at one instant.
// Every replica's /shards/watch is followed too: its typed events agree
// with its states; the leaver's say draining, then released, for each of
// its shards, and the last one's say acquired with the new tokens.
func TestShardGroupOnOneSQLiteFile(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	p := sidecartest.NewShardSampler(testShards)
	var live []*sidecartest.Sidecar
	for range 3 {
		live = append(live, sidecartest.Launch(t, db, sidecartest.ShardArgs()...))
	}
	start := time.Now()
	var watches []*sidecartest.ShardsWatch
	for _, s := range live {
		s.WaitServing()
		p.Sample(s)
		watches = append(watches, s.WatchShards(t))
	}
	holders, tokens := p.AwaitSpread(t, live, 20*time.Second, sidecartest.AnyToken)
	t.Logf("8 shards spread over 3 replicas %v after start", time.Since(start).Round(time.Millisecond))

	victim := live[0]
	lost := sidecartest.HeldBy(victim, holders)
	before := tokens
	killed := time.Now()
	if err := victim.Cmd().Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.WaitExit(5 * time.Second)
	live = live[1:]
	holders, tokens = p.AwaitSpread(t, live, sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second, sidecartest.HigherThan(lost, before))
	took := time.Since(killed)
	t.Logf("kill -9: shards %v held again after %v (lease %v)", lost, took.Round(time.Millisecond), sidecartest.LeaseDuration)
	if took < sidecartest.LeaseDuration-sidecartest.RenewInterval {
		t.Errorf("the killed replica's shards were held again after %v, before its claims could have expired", took)
	}

	leaver := live[0]
	moved := sidecartest.HeldBy(leaver, holders)
	before = tokens
	stopped := time.Now()
	leaver.Signal(syscall.SIGTERM)
	live = live[1:]
	_, tokens = p.AwaitSpread(t, live, 6*sidecartest.RetryPeriod, sidecartest.HigherThan(moved, before))
	t.Logf("SIGTERM: shards %v moved after %v", moved, time.Since(stopped).Round(time.Millisecond))
	if code := leaver.WaitExit(5 * time.Second); code != 0 {
		t.Errorf("the replica stopped with SIGTERM exited %d, want 0", code)
	}
	p.Check(t)
	checkShardEvents(t, watches, moved, before, tokens)
	checkRows(t, db, live[0], leaver, victim)
}

// checkShardEvents checks the /shards/watch streams of the three replicas
// (the killed one, the leaver, the last one): each one's typed events
// agree with its states; the leaver's stream says draining, then
// released, for each shard of moved with its token before; the last
// one's says acquired for each with its token after.
func checkShardEvents(t *testing.T, watches []*sidecartest.ShardsWatch, moved []int, before, after []int64) {
	t.Helper()
	<-watches[1].Ended() // the leaver has exited
	var named [3][]fence.ShardEventJSON
	for i, w := range watches {
		var err error
		if named[i], err = sidecartest.ReplayShardEvents(w.Events()); err != nil {
			t.Errorf("replica %d's /shards/watch: %v", i, err)
		}
	}
	has := func(evs []fence.ShardEventJSON, event string, shard int, token int64) bool {
		return slices.ContainsFunc(evs, func(e fence.ShardEventJSON) bool {
			return e.Event == event && e.Shard == shard && e.Token == token
		})
	}
	for _, i := range moved {
		draining := slices.IndexFunc(named[1], func(e fence.ShardEventJSON) bool {
			return e.Event == fence.EventDraining && e.Shard == i && e.Token == before[i]
		})
		released := slices.IndexFunc(named[1], func(e fence.ShardEventJSON) bool {
			return e.Event == fence.EventReleased && e.Shard == i && e.Token == before[i]
		})
		if draining < 0 || released < draining {
			t.Errorf("the leaver's stream has no draining then released of shard %d token %d: %+v", i, before[i], named[1])
		}
		if !has(named[2], fence.EventAcquired, i, after[i]) {
			t.Errorf("the last replica's stream has no acquired of shard %d token %d: %+v", i, after[i], named[2])
		}
	}
	t.Logf("/shards/watch: %d, %d and %d typed events", len(named[0]), len(named[1]), len(named[2]))
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

// TestShardsPageCommand runs the commands docs/shards.md shows, one on
// SQLite and one on PostgreSQL, on a file and a table of the test's own:
// a sidecar alone in group billing holds its 8 shards.
func TestShardsPageCommand(t *testing.T) {
	t.Parallel()
	lines := docLines(docBlocks(t, "shards.md"), "sidecar ")
	if len(lines) != 2 {
		t.Fatalf("docs/shards.md shows %d sidecar commands, want 2 (SQLite, PostgreSQL): %q", len(lines), lines)
	}
	for _, line := range lines {
		args := strings.Fields(strings.TrimPrefix(line, "sidecar "))
		for i, a := range args {
			switch {
			case a == "--sqlite-path" && i+1 < len(args):
				args[i+1] = sidecartest.DBPath(t)
			case a == "--postgres-url" && i+1 < len(args):
				args[i+1] = postgresServer.Server(t).URL("postgres")
				args = append(args, "--postgres-table", freshTable("shards_page"))
			}
		}
		s := sidecartest.Spawn(t, nil, args...)
		s.WaitServing()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := s.Shards()
			if err == nil && st.Group == "billing" && st.Shards == 8 && len(st.Held) == 8 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET /shards: %+v, %v; want group billing holding its 8 shards", line, st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestReadmeShardMode runs the README's shard-mode session as written, on
// a file of the test's own and the sidecar's own address: a sidecar alone
// in group billing holds its 4 shards, and each curl prints what the
// README shows. The session runs the binary that the README's first run
// builds (./sidecar), on the file its sidecars elect on (the default,
// leader-sidecar.db), so that it can be pasted after it.
func TestReadmeShardMode(t *testing.T) {
	t.Parallel()
	const first = "$ ./sidecar --sqlite-path leader-sidecar.db --lease-name billing --shards 4 &"
	blocks := shellBlocks(t, "README.md")
	blockStarting(t, blocks, "go build -o sidecar ./cmd/sidecar")
	commands, shown := transcript(blockStarting(t, blocks, first))
	args := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(commands[0], "./sidecar "), " &"))
	help, _ := exec.Command(sidecartest.Binary(t), "--help").CombinedOutput()
	def := regexp.MustCompile(`--sqlite-path string .*\(default "([^"]+)"\)`).FindSubmatch(help)
	if def == nil {
		t.Fatalf("sidecar --help gives no default of --sqlite-path:\n%s", help)
	}
	if !slices.Contains(args, string(def[1])) {
		t.Fatalf("the README's shard session %q is not on the first run's file %s, the default", commands[0], def[1])
	}
	for i, a := range args {
		if a == "--sqlite-path" && i+1 < len(args) {
			args[i+1] = sidecartest.DBPath(t)
		}
	}
	s := sidecartest.Spawn(t, nil, args...)
	s.WaitServing()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, err := s.Shards(); err == nil && len(st.Held) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the README's sidecar did not hold its 4 shards within 10 s")
		}
	}
	var printed string
	for _, c := range commands[1:] {
		c = strings.ReplaceAll(c, "localhost:4040", s.Addr())
		out, err := exec.Command("sh", "-c", c).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		printed += string(out)
	}
	if printed != shown {
		t.Errorf("the README's commands printed\n%s\nwhere it shows\n%s", printed, shown)
	}
}
