package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// Elector is what the API reads and drives; *election.Elector implements it.
type Elector interface {
	Status() election.Status
	Changed() <-chan struct{}
	Release(ctx context.Context) (election.Status, error)
	Handoff(ctx context.Context, to string) (election.Status, error)
	Healthy() bool
}

// Info describes the election for answers.
type Info struct {
	// Lease names what is being elected.
	Lease string
	// Backend names the store kind, e.g. "sqlite" or "lease".
	Backend string
}

// newState is the answer of GET /leader and of each /leader/watch event
// for s, made at now; appHealthy is Options.AppHealthy. A term whose claim
// has ended by now is not claimed: s was read before now, and a process
// paused in between (SIGSTOP, a stalled node) must not wake up to send a
// claim that ended while it slept.
func newState(s election.Status, info Info, now time.Time, appHealthy func() bool) fence.LeaderJSON {
	st := fence.LeaderJSON{
		Identity: s.Identity,
		Holder:   s.Holder,
		Lease:    info.Lease,
		Backend:  info.Backend,
	}
	if appHealthy != nil {
		healthy := appHealthy()
		st.AppHealthy = &healthy
	}
	if s.Leader && now.Before(s.ValidUntil) {
		st = st.WithTerm(s.Token, s.ValidUntil, now)
	}
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func writeText(w http.ResponseWriter, code int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text + "\n"))
}
