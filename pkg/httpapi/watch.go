package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// writeTimeout bounds each SSE write, so a client that stops reading is
// dropped instead of holding a goroutine forever.
const writeTimeout = 10 * time.Second

// startEventStream answers 200 with the headers of a Server-Sent Events
// stream (no caching, no proxy buffering) and returns the controller its
// events are flushed through.
func startEventStream(w http.ResponseWriter) *http.ResponseController {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}

// watch streams the state as Server-Sent Events: once at once, then on each
// change, including the instant a leader's claim lapses (validUntil), which
// no store event announces.
func (a *api) watch(w http.ResponseWriter, r *http.Request) {
	rc := startEventStream(w)

	keepAlive := time.NewTicker(a.opts.KeepAlive)
	defer keepAlive.Stop()
	lapse := time.NewTimer(0)
	defer lapse.Stop()
	var last []byte // the last event sent, without validForMs
	for {
		changed := a.e.Changed() // before Status, so no change is missed
		s := a.e.Status()
		body, key, err := event(newState(s, a.info, time.Now(), a.opts.AppHealthy))
		if err != nil {
			return
		}
		if string(key) != string(last) {
			if !send(rc, w, a.opts.writeTimeout, "data: %s\n\n", body) {
				return
			}
			last = key
		}
		var lapsed <-chan time.Time
		if s.Leader {
			lapse.Reset(time.Until(s.ValidUntil))
			lapsed = lapse.C
		}
		if !awaitNext(rc, w, r, a.opts, changed, lapsed, keepAlive.C) {
			return
		}
	}
}

// event is the body of the event for st, and what tells it from the last
// one sent: the body without validForMs, which shrinks with every moment
// and is no change.
func event(st fence.LeaderJSON) (body, key []byte, err error) {
	if body, err = json.Marshal(st); err != nil {
		return nil, nil, err
	}
	st.ValidForMs = nil
	key, err = json.Marshal(st)
	return body, key, err
}

// awaitNext waits for a reason to send a stream's next event: a change,
// the lapse of a claim, or the keep-alive period (whose comment it sends).
// It returns false when the stream ends: the client left, the server
// stops, or a write failed.
func awaitNext(rc *http.ResponseController, w http.ResponseWriter, r *http.Request, opts Options,
	changed <-chan struct{}, lapsed, keepAlive <-chan time.Time) bool {
	select {
	case <-changed:
	case <-lapsed:
	case <-keepAlive:
		return send(rc, w, opts.writeTimeout, ": keep-alive\n\n")
	case <-r.Context().Done():
		return false
	case <-opts.Done:
		return false
	}
	return true
}

// send writes one event (or comment) of a stream within timeout and
// flushes it; false when the client cannot be written to.
func send(rc *http.ResponseController, w http.ResponseWriter, timeout time.Duration, format string, args ...any) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(w, format, args...); err != nil {
		return false
	}
	return rc.Flush() == nil
}
