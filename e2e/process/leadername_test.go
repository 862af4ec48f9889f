package process

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// leaderName asks s GET /, the contrib leader-elector's answer, and checks
// that the body is exactly {"name": ...}.
func leaderName(s *sidecartest.Sidecar) (string, error) {
	resp, err := sidecartest.Client.Get("http://" + s.Addr() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /: %s", resp.Status)
	}
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || len(raw) != 1 || raw["name"] == nil {
		return "", fmt.Errorf("GET / answered %v (%v), want exactly one field, name", raw, err)
	}
	var n httpapi.LeaderName
	if err := json.Unmarshal(raw["name"], &n.Name); err != nil {
		return "", fmt.Errorf("GET /: name %s: %v", raw["name"], err)
	}
	return n.Name, nil
}

// everyoneNames waits until every sidecar answers GET / with want.
func everyoneNames(t *testing.T, all []*sidecartest.Sidecar, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var got []string
		for _, s := range all {
			name, err := leaderName(s)
			if err != nil {
				t.Fatal(err)
			}
			if name != want {
				got = append(got, name)
			}
		}
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET / still answers %q %v later, want %q everywhere", got, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Sidecars named by POD_NAME, as the Downward API sets it, answer GET /
// with the Pod name of the holder, on the leader and the standby alike,
// as the contrib leader-elector did; "" while nobody holds the lease.
func TestRootNamesTheLeadersPod(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	pods := map[*sidecartest.Sidecar]string{}
	var all []*sidecartest.Sidecar
	for _, pod := range []string{"web-7d9f4-x2x7k", "web-7d9f4-q8zrt"} {
		s := sidecartest.Spawn(t, []string{"POD_NAME=" + pod}, "--sqlite-path", db)
		s.WaitServing()
		pods[s] = pod
		all = append(all, s)
	}
	first, _ := sidecartest.AwaitLeader(t, all, 10*time.Second)
	everyoneNames(t, all, pods[first], 5*time.Second)

	if code, st := release(t, first); code != http.StatusOK {
		t.Fatalf("releasing the leader: %d %+v", code, st)
	}
	second, _ := sidecartest.AwaitLeader(t, sidecartest.Without(all, first), sidecartest.LeaseDuration)
	everyoneNames(t, all, pods[second], 5*time.Second)

	// The first is still held off by its release (a lease duration): once
	// the second releases too, nobody holds the lease.
	if code, st := release(t, second); code != http.StatusOK {
		t.Fatalf("releasing the second leader: %d %+v", code, st)
	}
	everyoneNames(t, all, "", time.Second)
}
