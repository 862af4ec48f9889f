package process

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
)

// startRaceRounds is how many rounds TestSQLiteFileLostWhileCandidatesStart
// runs for each loss.
const startRaceRounds = 5

// lastLine is the last line of logs.
func lastLine(logs string) string {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	return lines[len(lines)-1]
}

// TestSQLiteFileLostWhileCandidatesStart: a sidecar leads on leader.db and
// two more are launched; at a random instant from 0 to 20 ms later, while
// they are still starting, the file is lost (deleted with its -wal and
// -shm, or another database renamed over it after its -wal and -shm were
// removed, as the docs say to replace it) and a fourth sidecar is launched
// on the path. Every sidecar serving is asked GET /leader every 10 ms for
// 2.5 s (most of a lease): no sample may have two leader:true answers. At
// the end, the sidecars still running are all on the file at the path:
// exactly one leads, and every one names it as the holder. Every sidecar
// that exited did so non-zero, naming the file (the store was lost, or
// could not be opened as it was lost).
func TestSQLiteFileLostWhileCandidatesStart(t *testing.T) {
	t.Parallel()
	for _, loss := range []struct {
		name string
		lose func(t *testing.T, path, other string) error
	}{
		{"deleted", func(_ *testing.T, path, _ string) error { return sidecartest.RemoveDatabase(path) }},
		{"replaced", func(_ *testing.T, path, other string) error {
			for _, p := range []string{path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return os.Rename(other, path)
		}},
	} {
		t.Run(loss.name, func(t *testing.T) {
			t.Parallel()
			var samples, doubles, exited int
			for round := range startRaceRounds {
				s, d, e := startRaceRound(t, round, loss.lose)
				samples, doubles, exited = samples+s, doubles+d, exited+e
			}
			t.Logf("%d rounds: %d samples of every serving sidecar, %d with two leaders; %d sidecars exited on the loss",
				startRaceRounds, samples, doubles, exited)
			if doubles > 0 {
				t.Fatalf("%d samples had two leader:true answers", doubles)
			}
		})
	}
}

func startRaceRound(t *testing.T, round int, lose func(t *testing.T, path, other string) error) (samples, doubles, exited int) {
	dir := t.TempDir()
	path, other := filepath.Join(dir, "leader.db"), filepath.Join(dir, "other.db")
	makeReleasedDatabase(t, other, 5)

	first := sidecartest.Start(t, path)
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{first}, 10*time.Second)
	all := []*sidecartest.Sidecar{first, sidecartest.Launch(t, path), sidecartest.Launch(t, path)}
	time.Sleep(time.Duration(rand.Int64N(int64(20 * time.Millisecond)))) // random instant of the loss: a race, not a wait
	if err := lose(t, path, other); err != nil {
		t.Fatal(err)
	}
	all = append(all, sidecartest.Launch(t, path))

	end := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(end) {
		leaders := 0
		for _, s := range all {
			select {
			case <-s.Ready():
			default:
				continue // not serving yet
			}
			if !s.Alive() {
				continue
			}
			if st, err := s.Leader(); err == nil && st.Leader {
				leaders++
			}
		}
		samples++
		if leaders > 1 {
			doubles++
		}
		time.Sleep(sidecartest.SweepEvery)
	}

	var alive []*sidecartest.Sidecar
	for i, s := range all {
		if s.Alive() {
			alive = append(alive, s)
			continue
		}
		exited++
		if code := s.WaitExit(time.Second); code == 0 || !strings.Contains(s.Logs(), path) {
			t.Fatalf("round %d: sidecar %d exited with status %d, want non-zero and a log naming %s:\n%s",
				round, i, code, path, s.Logs())
		}
		if !strings.Contains(s.Logs(), "store lost") {
			t.Logf("round %d: sidecar %d could not open the file as it was lost (it exits to start again): %s",
				round, i, lastLine(s.Logs()))
		}
	}
	for _, s := range alive {
		s.WaitServing()
	}
	leader, _ := sidecartest.AwaitLeader(t, alive, 2*sidecartest.LeaseDuration+time.Second)
	want := sidecartest.IdentityOf(t, leader)
	for i, s := range alive {
		if st, err := s.Leader(); err != nil || st.Holder != want {
			t.Fatalf("round %d: running sidecar %d names holder %q (%v) while %q leads: it is on another file than the leader",
				round, i, st.Holder, err, want)
		}
	}
	return samples, doubles, exited
}

// makeReleasedDatabase makes an election database at path whose record was
// released at token.
func makeReleasedDatabase(t *testing.T, path string, token int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := sqlite.Open(ctx, sqlite.Options{Path: path, Election: "leader-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backend.Record{LeaseDurationSeconds: 3, Transitions: token}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
