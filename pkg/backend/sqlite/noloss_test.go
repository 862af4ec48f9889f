package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestNoLossInNormalUse: handles in this process and in others write the
// file round after round, then every connection closes so that SQLite
// deletes the -wal and -shm files and makes new ones on the next write.
// None of that is a loss: Lost stays open and every call succeeds.
func TestNoLossInNormalUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	watched, _ := openLive(t, path, nil)
	// No idle connections: between calls this handle holds the file by no
	// connection at all, so SQLite's last close deletes -wal and -shm.
	watched.db.SetMaxIdleConns(0)
	watched.releaseDB.SetMaxIdleConns(0)

	t.Run("processes and handles write", func(t *testing.T) {
		other := openT(t, path, "e")
		hs := startHelpers(t, 3, path, "e")
		for round := range 5 {
			v := mustVersion(t, other)
			answers := raceCommand(t, hs, func(i int) string { return fmt.Sprintf("update %s p%d-r%d", v, i, round) })
			oneWinner(t, answers, "conflict")
			if _, err := other.Update(ctxT(t), mustVersion(t, other), backendtest.SampleRecord("other", 2)); err != nil {
				t.Fatalf("round %d: Update: %v", round, err)
			}
		}
	}) // the helpers and the other handle are closed here

	for round := range 3 {
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(path + suffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("round %d: %s%s still there with every connection closed (stat: %v)", round, path, suffix, err)
			}
		}
		v := mustVersion(t, watched)
		if _, err := watched.Update(ctxT(t), v, backendtest.SampleRecord("watched", 3)); err != nil {
			t.Fatalf("round %d: Update: %v", round, err)
		}
	}
	mustVersion(t, watched)
	select {
	case <-watched.Lost():
		t.Fatal("Lost closed in normal use")
	default:
	}
}
