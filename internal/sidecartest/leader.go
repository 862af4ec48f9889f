package sidecartest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// State is the JSON of GET /leader: the product's one wire type.
type State = fence.LeaderJSON

// ParseState decodes one /leader answer or /leader/watch event.
func ParseState(data []byte) (State, error) {
	var st State
	err := json.Unmarshal(data, &st)
	return st, err
}

// Client is the HTTP client the helpers ask sidecars with.
var Client = &http.Client{Timeout: 5 * time.Second}

// Leader asks the sidecar GET /leader.
func (p *Proc) Leader() (State, error) {
	resp, err := Client.Get("http://" + p.addr + "/leader")
	if err != nil {
		return State{}, err
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return State{}, fmt.Errorf("decoding /leader: %w", err)
	}
	return st, nil
}

// IdentityOf is the identity s answers with, failing t if it cannot answer.
func IdentityOf(t testing.TB, s *Sidecar) string {
	t.Helper()
	st, err := s.Leader()
	if err != nil {
		t.Fatal(err)
	}
	return st.Identity
}

// Leaders samples every live sidecar once and returns those that answered
// leader:true with their states. It fails t on a sweep with two, on a
// leader without a valid token, and on a live sidecar that did not answer.
func Leaders(t testing.TB, all []*Sidecar) ([]*Sidecar, []State) {
	t.Helper()
	var ls []*Sidecar
	var sts []State
	for _, s := range all {
		if !s.Alive() {
			continue
		}
		st, err := s.Leader()
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

// AwaitLeader polls until exactly one live sidecar leads, failing on a
// sweep with two, and returns it with its token.
func AwaitLeader(t testing.TB, all []*Sidecar, within time.Duration) (*Sidecar, int64) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ls, sts := Leaders(t, all); len(ls) == 1 {
			return ls[0], *sts[0].Token
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", within)
	return nil, 0
}
