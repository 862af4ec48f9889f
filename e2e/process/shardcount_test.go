package process

import (
	"fmt"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// TestShardCountChangeOnOneSQLiteFile changes a group's shard count by a
// rolling update, on one SQLite file, both ways (2 to 4, and back from 4
// to 2): two replicas of the old count hold every shard, one of the new
// count joins and both run side by side for four lease durations, then
// the old ones stop. Every replica's GET /shards is sampled throughout:
// no key is ever held by two replicas at one instant (the ranges of the
// answers), and the new replica holds every shard of its count within
// three lease durations of the old ones being told to stop.
func TestShardCountChangeOnOneSQLiteFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ from, to int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%d to %d", c.from, c.to), func(t *testing.T) {
			t.Parallel()
			db := sidecartest.DBPath(t)
			sidecartest.CountChange{
				From: c.from, To: c.to,
				Spawn: func(t testing.TB, extra ...string) *sidecartest.Sidecar {
					return sidecartest.Launch(t, db, extra...)
				},
				Mix:    4 * sidecartest.LeaseDuration,
				Within: 3 * sidecartest.LeaseDuration,
			}.Run(t)
		})
	}
}
