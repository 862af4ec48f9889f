package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// processes is how many helper processes race in each round.
const processes = 8

// startHelpers starts n helpers on the election of path at once, so that
// they open the file concurrently, and waits until each is ready.
func startHelpers(t *testing.T, n int, path, election string) []*helper {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary: %v", err)
	}
	hs := make([]*helper, n)
	for i := range hs {
		hs[i] = startHelper(t, exe, path, election, nil)
	}
	for i, h := range hs {
		if l := h.next(t); l != "ready" {
			t.Fatalf("helper %d: Open: %s", i, l)
		}
	}
	return hs
}

// raceCommand writes one command to every helper, as close together as the
// pipes allow, and returns each helper's answer.
func raceCommand(t *testing.T, hs []*helper, command func(i int) string) []string {
	t.Helper()
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			if _, err := fmt.Fprintln(h.stdin, command(i)); err != nil {
				t.Errorf("helper %d: write command: %v", i, err)
			}
		})
	}
	wg.Wait()
	answers := make([]string, len(hs))
	for i, h := range hs {
		answers[i] = h.next(t)
	}
	return answers
}

// oneWinner checks that exactly one answer is "won <version>" and all others
// are loser, and returns the winner's index and version.
func oneWinner(t *testing.T, answers []string, loser string) (int, backend.Version) {
	t.Helper()
	winner, version := -1, backend.Version("")
	for i, a := range answers {
		switch {
		case strings.HasPrefix(a, "won "):
			if winner >= 0 {
				t.Fatalf("processes %d and %d both won: %q", winner, i, answers)
			}
			winner, version = i, backend.Version(strings.TrimPrefix(a, "won "))
		case a != loser:
			t.Fatalf("process %d answered %q, want %q or a win", i, a, loser)
		}
	}
	if winner < 0 {
		t.Fatalf("no process won: %q", answers)
	}
	return winner, version
}

// TestProcessesRaceUpdate has separate OS processes race an Update from the
// same version, round after round: exactly one wins each round, the stored
// record is the winner's, and a watch in this process signals the write.
func TestProcessesRaceUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openT(t, path, "race")
	version, err := b.Create(ctxT(t), backendtest.SampleRecord("start", 1))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	hs := startHelpers(t, processes, path, "race")
	changes := b.Watch(ctxT(t))
	waitSignal(t, changes, 10*time.Second, "baseline")
	for round := range 5 {
		answers := raceCommand(t, hs, func(i int) string {
			return fmt.Sprintf("update %s p%d-r%d", version, i, round)
		})
		winner, won := oneWinner(t, answers, "conflict")
		rec, v, err := b.Get(ctxT(t))
		if err != nil {
			t.Fatalf("round %d: Get: %v", round, err)
		}
		if want := fmt.Sprintf("p%d-r%d", winner, round); rec.HolderIdentity != want || v != won {
			t.Fatalf("round %d: stored %q at version %q, want the winner's %q at %q", round, rec.HolderIdentity, v, want, won)
		}
		version = v
		waitSignal(t, changes, 10*time.Second, fmt.Sprintf("round %d: a write by another process", round))
	}
}

// TestProcessesRaceCreate has separate OS processes open a file that does
// not exist yet, all at once (racing the schema creation), then race a
// Create: exactly one wins.
func TestProcessesRaceCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fresh.db")
	hs := startHelpers(t, processes, path, "race-create")
	answers := raceCommand(t, hs, func(i int) string { return fmt.Sprintf("create p%d", i) })
	winner, won := oneWinner(t, answers, "exists")

	rec, v, err := openT(t, path, "race-create").Get(ctxT(t))
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if want := fmt.Sprintf("p%d", winner); rec.HolderIdentity != want || v != won {
		t.Fatalf("stored %q at version %q, want the winner's %q at %q", rec.HolderIdentity, v, want, won)
	}
}
