package fence_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// stubSidecar answers GET /leader and GET /leader/watch with the
// fence.LeaderJSON it was last given, as the sidecar does, so that the
// examples run with the standard library alone. (The client is tested
// against the sidecar's real API in the sidecar's own module.)
type stubSidecar struct {
	*httptest.Server
	mu      sync.Mutex
	state   fence.LeaderJSON
	changed chan struct{}
}

func newStubSidecar(st fence.LeaderJSON) *stubSidecar {
	s := &stubSidecar{state: st, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/leader", func(w http.ResponseWriter, _ *http.Request) {
		body, _ := s.current()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/leader/watch", s.watch)
	s.Server = httptest.NewServer(mux)
	return s
}

// Set changes the state and sends it to every watcher.
func (s *stubSidecar) Set(st fence.LeaderJSON) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *stubSidecar) current() ([]byte, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := json.Marshal(s.state)
	return body, s.changed
}

func (s *stubSidecar) watch(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for {
		body, changed := s.current()
		if _, err := fmt.Fprintf(w, "data: %s\n\n", body); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

// leaderJSON is what the sidecar of identity answers while it leads with
// token for validFor more.
func leaderJSON(identity string, token int64, validFor time.Duration) fence.LeaderJSON {
	now := time.Now()
	return fence.LeaderJSON{Identity: identity, Holder: identity, Lease: "default/billing", Backend: "lease"}.
		WithTerm(token, now.Add(validFor), now)
}

// followerJSON is what the sidecar of identity answers while holder leads.
func followerJSON(identity, holder string) fence.LeaderJSON {
	return fence.LeaderJSON{Identity: identity, Holder: holder, Lease: "default/billing", Backend: "lease"}
}
