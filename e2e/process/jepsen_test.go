package process

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/pgtest"
	"github.com/leader-sidecar/leader-sidecar/internal/settest"
	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The set test of internal/settest, in the manner of Jepsen's lock-set:
// three sidecars elect, on one SQLite file and through the PostgreSQL
// server; each replica's app appends ids of its own to one list in a
// PostgreSQL row while it believes its sidecar leads; a seeded nemesis
// pauses the leader's sidecar past the lease (its app keeps writing with
// the term it last heard: a stale leader), cuts a PostgreSQL leader's
// sidecar off from the server or slows its path to it, restarts the
// server of the election's records (down for a lease and more), and kills
// sidecars, starting new ones in their place. LEADER_SIDECAR_JEPSEN_DURATION runs the
// nemesis longer (make jepsen), LEADER_SIDECAR_JEPSEN_SEED sets its seed.

// setStores are the stores the set test's sidecars elect through: each
// sets c's Launch (and Cut, where the store can be cut off) to start
// sidecars on the store of the run whose list is in table.
var setStores = []struct {
	name  string
	store func(t *testing.T, table string, c *settest.Config)
}{
	{"sqlite", func(t *testing.T, _ string, c *settest.Config) {
		file := sidecartest.DBPath(t)
		c.Launch = func() *sidecartest.Sidecar { return sidecartest.Launch(t, file) }
	}},
	{"postgres", func(t *testing.T, table string, c *settest.Config) {
		// The election's records on a server of their own, which the
		// nemesis restarts (the list stays on the package's server). Each
		// sidecar reaches it through a proxy of its own, which the nemesis
		// cuts or slows.
		records, err := pgtest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := records.Stop(); err != nil {
				t.Errorf("stopping the records' PostgreSQL: %v", err)
			}
		})
		socket := filepath.Join(records.SocketDir, ".s.PGSQL.5432")
		var proxied settest.ProxiedStore
		c.Launch = func() *sidecartest.Sidecar {
			px := sidecartest.NewTCPProxy(t, socket)
			url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", px.Addr())
			s := sidecartest.Spawn(t, []string{"LEADER_SIDECAR_POSTGRES_URL=" + url}, "--backend", "postgres", "--postgres-table", table+"_election")
			proxied.Add(s, px)
			return s
		}
		restart := settest.StoreFault{Name: "store restart", Inject: func(*sidecartest.Sidecar) func() {
			// A fast shutdown of the records' server, every session ended,
			// until the nemesis undoes the fault; then the same data again.
			if err := records.Halt(); err != nil {
				t.Errorf("stopping the records' PostgreSQL: %v", err)
			}
			return func() {
				if err := records.Resume(); err != nil {
					t.Errorf("starting the records' PostgreSQL again: %v", err)
				}
			}
		}}
		c.StoreFaults = append(proxied.Faults(slowStore), restart)
	}},
}

// slowStore is the delay of the slow store fault, each way: a renewal's
// round trips then take longer than the renew deadline.
const slowStore = 1500 * time.Millisecond

// setConfig is the set test's configuration: its list in table of the
// package's PostgreSQL server, its sidecars on store.
func setConfig(t *testing.T, table string, store func(*testing.T, string, *settest.Config)) settest.Config {
	t.Helper()
	db, err := sql.Open("pgx", postgresServer.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := settest.Config{DB: db, Table: table}
	store(t, table, &c)
	return c
}

// TestFencedSetUnderFaults: with fence.SQLGuard checking each append's
// term in its transaction, every acknowledged append is in the final
// list, no id is there twice or without an append that may have taken
// effect, the guard refused some appends (the stale leader existed), and
// porcupine finds the history linearizable as a list under atomic
// appends; on each store.
func TestFencedSetUnderFaults(t *testing.T) {
	t.Parallel()
	for _, store := range setStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			settest.Fenced(t, setConfig(t, "jepsen_fenced_"+store.name, store.store))
		})
	}
}

// TestUnfencedSetLosesWrites is the unsafe baseline: the same run with
// the apps writing without the guard. The stale leader's appends
// interleave with the new leader's, so the checker finds a violation (an
// acknowledged append lost or doubled, or a history porcupine calls not
// linearizable): the nemesis makes the faults the guard must stop.
func TestUnfencedSetLosesWrites(t *testing.T) {
	t.Parallel()
	for _, store := range setStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			settest.Unfenced(t, setConfig(t, "jepsen_unfenced_"+store.name, store.store))
		})
	}
}
