package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// maxHandoffBody bounds the body of POST /leader/handoff.
const maxHandoffBody = 4 << 10

// handoffRequest is the optional body of POST /leader/handoff.
type handoffRequest struct {
	// To is the candidate to hand off to: its identity or its Pod name.
	// Empty or absent: any candidate that answers.
	To string `json:"to"`
}

// handoff serves POST /leader/handoff: 200 with the new state once the
// record names the new holder; 409 on a replica that does not lead; 422
// when no candidate took it (the leader still leads); 400 for a body that
// is not {"to": "..."}; 503 when the store failed. Every answer is the
// state JSON, with an error field unless 200.
func (a *api) handoff(w http.ResponseWriter, r *http.Request) {
	to, err := readHandoffRequest(r.Body)
	if err != nil {
		st := newState(a.e.Status(), a.info, time.Now(), a.opts.AppHealthy)
		st.Error = err.Error()
		writeJSON(w, http.StatusBadRequest, st)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.ReleaseTimeout)
	defer cancel()
	s, err := a.e.Handoff(ctx, to)
	st := newState(s, a.info, time.Now(), a.opts.AppHealthy)
	code := http.StatusOK
	switch {
	case errors.Is(err, election.ErrNotLeader):
		code = http.StatusConflict
	case errors.Is(err, election.ErrNoTaker):
		code = http.StatusUnprocessableEntity
	case err != nil:
		code = http.StatusServiceUnavailable
	}
	if err != nil {
		st.Error = err.Error()
	}
	writeJSON(w, code, st)
}

// readHandoffRequest reads the target from an empty body or a JSON
// object with at most the one field "to", a string.
func readHandoffRequest(body io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxHandoffBody+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the request body: %w", err)
	case len(data) > maxHandoffBody:
		return "", fmt.Errorf("the request body is larger than %d bytes; want {\"to\": \"<identity or Pod name>\"} or nothing", maxHandoffBody)
	case strings.TrimSpace(string(data)) == "":
		return "", nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var req handoffRequest
	if err := dec.Decode(&req); err != nil {
		return "", fmt.Errorf("the request body is not {\"to\": \"<identity or Pod name>\"}: %v", err)
	}
	if dec.More() {
		return "", errors.New("the request body has more than one JSON value; want {\"to\": \"<identity or Pod name>\"}")
	}
	return req.To, nil
}
