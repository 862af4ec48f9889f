package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Elector is what the API reads and drives; *election.Elector implements it.
type Elector interface {
	Status() election.Status
	Changed() <-chan struct{}
	Release(ctx context.Context) (election.Status, error)
	Healthy() bool
}

// Info describes the election for answers.
type Info struct {
	// Lease names what is being elected.
	Lease string
	// Backend names the store kind, e.g. "sqlite" or "lease".
	Backend string
}

// State is the JSON body of GET /leader.
type State struct {
	Leader   bool   `json:"leader"`
	Identity string `json:"identity"`
	Holder   string `json:"holder"`
	// Token is the fencing token, present only while Leader.
	Token *int64 `json:"token"`
	// ValidUntil is when the claim lapses unless renewed, only while Leader.
	ValidUntil *time.Time `json:"validUntil"`
	Lease      string     `json:"lease"`
	Backend    string     `json:"backend"`
	// Error is set only by POST /leader/release when the release could not
	// be written; the candidate has stepped down regardless.
	Error string `json:"error,omitempty"`
}

func newState(s election.Status, info Info) State {
	st := State{
		Leader:   s.Leader,
		Identity: s.Identity,
		Holder:   s.Holder,
		Lease:    info.Lease,
		Backend:  info.Backend,
	}
	if s.Leader {
		token, until := s.Token, s.ValidUntil.UTC()
		st.Token, st.ValidUntil = &token, &until
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
