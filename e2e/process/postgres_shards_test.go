package process

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// spawnShardsOnPostgres starts a sidecar on table of the test server,
// connecting as application app (its connections are counted by that
// name in pg_stat_activity), with the password the tests never log.
func spawnShardsOnPostgres(t testing.TB, table, app string, extra ...string) *sidecartest.Sidecar {
	t.Helper()
	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1) + "&application_name=" + app
	return sidecartest.Spawn(t, []string{"LEADER_SIDECAR_POSTGRES_URL=" + url},
		append([]string{"--backend", "postgres", "--postgres-table", table}, extra...)...)
}

// connectionsOf counts the server's connections of application app.
func connectionsOf(t *testing.T, app string) int {
	t.Helper()
	db, err := sql.Open("pgx", postgresServer.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// freshTable is a table name of prefix that no run has used: the server
// is shared by a run's tests and the records are never deleted.
func freshTable(prefix string) string {
	return prefix + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// pgShards is the shard count of the PostgreSQL group test: enough that a
// connection per shard would show.
const pgShards = 16

// TestShardGroupOnPostgres runs 3 sidecar processes in shard mode with 16
// shards on one PostgreSQL table, every replica's /shards sampled
// throughout (each shard's claims, and the key ranges of every answer):
// the 16 shards spread over them, each held once, at most 6 each, and
// each replica holds at most 4 connections to the server (a pool of 3 and
// one listening connection), counted in pg_stat_activity. After a kill -9
// of one, its shards are held again by the others with higher tokens once
// its claims expire; after a SIGTERM of another, the last holds every
// shard within a few retry periods, the leaver having exited 0. No shard
// and no key is ever claimed by two replicas at one instant. sidecar
// status --backend postgres lists the group's records; once the last one
// is killed, sidecar reset --backend postgres --shards 16 releases every
// shard record after its lease. It runs with each change signal: auto
// (the default; LISTEN on this server) and poll, whose replicas hold at
// most 3 connections (the pool alone).
func TestShardGroupOnPostgres(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		signal string
		most   int
	}{{"auto", 4}, {"poll", 3}} {
		t.Run(c.signal, func(t *testing.T) {
			t.Parallel()
			shardGroupOnPostgres(t, c.signal, c.most)
		})
	}
}

// shardGroupOnPostgres is TestShardGroupOnPostgres with --postgres-signal
// signal, each replica holding at most most connections.
func shardGroupOnPostgres(t *testing.T, signal string, most int) {
	table := freshTable("shard_group_" + signal)
	shards := sidecartest.NewShardSampler(pgShards).WithoutAcks() // the range sampler acknowledges drains
	ranges := sidecartest.NewRangeSampler()
	var live []*sidecartest.Sidecar
	sidecartest.Binary(t) // built before the clock starts
	start := time.Now()
	for i := range 3 {
		live = append(live, spawnShardsOnPostgres(t, table, fmt.Sprintf("%s-%d", table, i),
			append(sidecartest.ShardCountArgs(pgShards), "--postgres-signal", signal)...))
	}
	for _, s := range live {
		s.WaitServing()
		shards.Sample(s)
		ranges.Sample(s)
	}
	holders, tokens := shards.AwaitSpread(t, live, 20*time.Second, sidecartest.AnyToken)
	t.Logf("%d shards spread over 3 replicas %v after start", pgShards, time.Since(start).Round(time.Millisecond))
	for i := range live {
		n := connectionsOf(t, fmt.Sprintf("%s-%d", table, i))
		t.Logf("replica %d with %d shards: %d connections", i, pgShards, n)
		if n > most {
			t.Errorf("replica %d holds %d connections to the server for %d shards, want at most %d (a pool of 3, and one listener unless polling)", i, n, pgShards, most)
		}
	}

	victim := live[0]
	lost := sidecartest.HeldBy(victim, holders)
	before := tokens
	killed := time.Now()
	if err := victim.Cmd().Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.WaitExit(5 * time.Second)
	live = live[1:]
	holders, tokens = shards.AwaitSpread(t, live, sidecartest.LeaseDuration+8*sidecartest.RetryPeriod+2*time.Second, sidecartest.HigherThan(lost, before))
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
	_, tokens = shards.AwaitSpread(t, live, 6*sidecartest.RetryPeriod, sidecartest.HigherThan(moved, before))
	t.Logf("SIGTERM: shards %v moved after %v", moved, time.Since(stopped).Round(time.Millisecond))
	if code := leaver.WaitExit(5 * time.Second); code != 0 {
		t.Errorf("the replica stopped with SIGTERM exited %d, want 0", code)
	}
	shards.Check(t)
	ranges.Check(t)
	checkPostgresStatus(t, table, identityIn(t, live[0]), tokens)

	live[0].Signal(syscall.SIGKILL)
	live[0].WaitExit(5 * time.Second)
	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1)
	began := time.Now()
	out, err := exec.Command(sidecartest.Binary(t), "reset", "--backend", "postgres", "--postgres-url", url, "--postgres-table", table,
		"--shards", fmt.Sprint(pgShards), "--lease-duration", sidecartest.LeaseDuration.String()).CombinedOutput()
	if err != nil || strings.Count(string(out), "released at token") != pgShards {
		t.Fatalf("sidecar reset --backend postgres --shards %d: %v; want every shard released\n%s", pgShards, err, out)
	}
	if strings.Contains(string(out), neverLogged) {
		t.Fatalf("sidecar reset printed the password:\n%s", out)
	}
	if took := time.Since(began); took < sidecartest.LeaseDuration {
		t.Errorf("reset released after %v, before the holder's lease of %v could pass", took, sidecartest.LeaseDuration)
	}
	t.Logf("sidecar reset --shards %d released every shard record after %v", pgShards, time.Since(began).Round(time.Millisecond))
}

// checkPostgresStatus runs sidecar status --backend postgres -o json on
// table: it lists every shard record held by holder at the tokens the
// replicas answered, and the member records, and never the password.
func checkPostgresStatus(t *testing.T, table, holder string, tokens []int64) {
	t.Helper()
	url := strings.Replace(postgresServer.Server(t).URL("postgres"), "postgres@", "postgres:"+neverLogged+"@", 1)
	out, err := exec.Command(sidecartest.Binary(t), "status", "--backend", "postgres", "--postgres-url", url,
		"--postgres-table", table, "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("sidecar status --backend postgres: %v\n%s", err, out)
	}
	if strings.Contains(string(out), neverLogged) {
		t.Fatalf("sidecar status printed the password:\n%s", out)
	}
	var list struct {
		Elections []struct {
			Name, Holder, State string
			Token               int64
		}
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	members := 0
	shown := map[string]bool{}
	for _, e := range list.Elections {
		shown[e.Name] = true
		if strings.HasPrefix(e.Name, shardgroup.MemberPrefix("leader-sidecar")) {
			members++
		}
	}
	for i := range pgShards {
		name := shardgroup.ShardRecord("leader-sidecar", i)
		found := false
		for _, e := range list.Elections {
			if e.Name == name {
				found = true
				if e.Holder != holder || e.Token != tokens[i] || e.State != "held" {
					t.Errorf("status shows %s %s by %q at token %d; want held by %s at token %d", name, e.State, e.Holder, e.Token, holder, tokens[i])
				}
			}
		}
		if !found {
			t.Errorf("status does not list %s: %v", name, shown)
		}
	}
	if members != 3 {
		t.Errorf("status lists %d member records, want 3: %v", members, shown)
	}
}

// TestShardCountChangeOnPostgres is TestShardCountChangeOnOneSQLiteFile
// on one PostgreSQL table: a rolling update of the shard count, 2 to 4
// and 4 to 2, both counts side by side, every replica's key ranges
// sampled: no key is ever held by two replicas at one instant.
func TestShardCountChangeOnPostgres(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ from, to int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%d to %d", c.from, c.to), func(t *testing.T) {
			t.Parallel()
			table := freshTable(fmt.Sprintf("count_change_%d_%d", c.from, c.to))
			sidecartest.CountChange{
				From: c.from, To: c.to,
				Spawn: func(t testing.TB, extra ...string) *sidecartest.Sidecar {
					return spawnShardsOnPostgres(t, table, table, extra...)
				},
				Mix:    4 * sidecartest.LeaseDuration,
				Within: 3 * sidecartest.LeaseDuration,
			}.Run(t)
		})
	}
}
