package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// state is the JSON of GET /leader.
type state = fence.LeaderJSON

var client = &http.Client{Timeout: 5 * time.Second}

// leader asks the sidecar; a process that is gone answers not-leader.
func (s *sidecar) leader() (state, error) {
	resp, err := client.Get("http://" + s.addr + "/leader")
	if err != nil {
		return state{}, err
	}
	defer resp.Body.Close()
	var st state
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return state{}, fmt.Errorf("decoding /leader: %w", err)
	}
	return st, nil
}

// leaders samples every live sidecar once and returns those that answered
// leader:true with their states.
func leaders(t *testing.T, all []*sidecar) ([]*sidecar, []state) {
	t.Helper()
	var ls []*sidecar
	var sts []state
	for _, s := range all {
		if !s.alive() {
			continue
		}
		st, err := s.leader()
		if err != nil {
			t.Fatalf("GET /leader on a live sidecar: %v", err)
		}
		if st.Leader {
			if st.Token == nil || *st.Token < 1 {
				t.Fatalf("leader answered without a valid token: %+v", st)
			}
			ls = append(ls, s)
			sts = append(sts, st)
		}
	}
	if len(ls) > 1 {
		t.Fatalf("%d sidecars answered leader:true in one sweep", len(ls))
	}
	return ls, sts
}

// awaitLeader polls until exactly one live sidecar leads, failing on a
// sweep with two.
func awaitLeader(t *testing.T, all []*sidecar, within time.Duration) (*sidecar, int64) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ls, sts := leaders(t, all); len(ls) == 1 {
			return ls[0], *sts[0].Token
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", within)
	return nil, 0
}

func startMany(t *testing.T, db string, n int) []*sidecar {
	t.Helper()
	all := make([]*sidecar, n)
	for i := range all {
		all[i] = launch(t, db)
	}
	for _, s := range all {
		s.waitServing()
	}
	return all
}

func without(all []*sidecar, gone *sidecar) []*sidecar {
	var out []*sidecar
	for _, s := range all {
		if s != gone {
			out = append(out, s)
		}
	}
	return out
}

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "election.db") }
