package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// openRaceRounds is how many rounds each loss of
// TestBackendsOpenedAroundALossNeverDisagree runs; with -short (make unit),
// openRaceShortRounds.
const (
	openRaceRounds      = 150
	openRaceShortRounds = 25
)

// openRound opens a backend on path that the caller closes.
func openRound(t *testing.T, path string) *Backend {
	t.Helper()
	b, err := Open(ctxT(t), Options{Path: path, Election: "e"})
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return b
}

// TestBackendsOpenedAroundALossNeverDisagree: in every round a backend
// holds leader.db with a record, the file is lost (deleted with its -wal
// and -shm, or another database renamed over it), and four candidates open
// backends on the path at random offsets within a few milliseconds of the
// loss, each one reading the record and creating its own when there is
// none, as a starting candidate does. Afterwards each candidate's backend
// is asked again: it must either report ErrStoreLost (it opened the old
// file) or read exactly what a backend opened on the path now reads (it is
// on the file at the path). A backend that reads the old file while
// vouching for the new one would let a second leader claim on a dead file
// beside the leader on the live one. The backend that held the old file
// must report ErrStoreLost.
func TestBackendsOpenedAroundALossNeverDisagree(t *testing.T) {
	const candidates = 4
	for _, loss := range []struct {
		name string
		lose func(path, other string) error
	}{
		{"deleted", func(path, _ string) error {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		}},
		// As the package doc says to replace a file under running
		// processes: the old -wal and -shm removed in the same command.
		{"replaced", func(path, other string) error {
			for _, p := range []string{path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return os.Rename(other, path)
		}},
	} {
		t.Run(loss.name, func(t *testing.T) {
			t.Parallel() // each round in a directory of its own
			rounds := openRaceRounds
			if testing.Short() {
				rounds = openRaceShortRounds
			}
			var (
				lostOnes, onLive, disagreed int
				failed                      atomic.Int64
			)
			for round := range rounds {
				dir := t.TempDir()
				path, other := filepath.Join(dir, "leader.db"), filepath.Join(dir, "other.db")
				holder := openRound(t, path)
				if _, err := holder.Create(ctxT(t), backendtest.SampleRecord("old", 1)); err != nil {
					t.Fatalf("round %d: Create: %v", round, err)
				}
				replacement := openRound(t, other)
				if _, err := replacement.Create(ctxT(t), backendtest.SampleRecord("new", 7)); err != nil {
					t.Fatalf("round %d: Create in the other file: %v", round, err)
				}
				_ = replacement.Close()

				opened := make([]*Backend, candidates)
				begin := time.Now().Add(2 * time.Millisecond)
				var wg sync.WaitGroup
				for i := range opened {
					offset := time.Duration(rand.Int64N(int64(8 * time.Millisecond)))
					wg.Go(func() {
						time.Sleep(time.Until(begin.Add(offset)))
						b, err := Open(ctxT(t), Options{Path: path, Election: "e"})
						if err != nil { // a candidate that cannot open exits and starts again
							if failed.Add(1) == 1 {
								t.Logf("round %d: candidate %d: Open: %v", round, i, err)
							}
							return
						}
						opened[i] = b
						if _, _, err := b.Get(ctxT(t)); errors.Is(err, backend.ErrNotFound) {
							_, _ = b.Create(ctxT(t), backendtest.SampleRecord(fmt.Sprint("candidate-", i), 1))
						}
					})
				}
				time.Sleep(time.Until(begin.Add(4 * time.Millisecond)))
				if err := loss.lose(path, other); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				if d := time.Since(begin); d > time.Second {
					t.Logf("round %d took %v", round, d)
				}

				if _, _, err := holder.Get(ctxT(t)); !errors.Is(err, backend.ErrStoreLost) {
					t.Fatalf("round %d: the backend that held the old file: Get = %v, want ErrStoreLost", round, err)
				}
				truth := openRound(t, path)
				truthRec, truthV, truthErr := truth.Get(ctxT(t))
				for i, b := range opened {
					if b == nil {
						continue
					}
					rec, v, err := b.Get(ctxT(t))
					switch {
					case errors.Is(err, backend.ErrStoreLost):
						lostOnes++
					case errors.Is(err, backend.ErrNotFound) && errors.Is(truthErr, backend.ErrNotFound),
						err == nil && truthErr == nil && v == truthV && rec.HolderIdentity == truthRec.HolderIdentity:
						onLive++
					default:
						disagreed++
						t.Errorf("round %d: candidate %d reads %q at version %q (%v), while the file at the path holds %q at %q (%v)",
							round, i, rec.HolderIdentity, v, err, truthRec.HolderIdentity, truthV, truthErr)
					}
				}
				for _, b := range append(opened, holder, truth) {
					if b != nil {
						_ = b.Close() // each round's own: a process holds few descriptors
					}
				}
			}
			t.Logf("%d rounds, %d candidates each: %d could not open, %d reported the loss, %d on the file at the path, %d disagreed with it",
				rounds, candidates, failed.Load(), lostOnes, onLive, disagreed)
		})
	}
}
