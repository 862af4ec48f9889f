package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Options configure the handlers. Zero values take defaults.
type Options struct {
	// Metrics serves GET /metrics; nil answers 404 there.
	Metrics http.Handler
	// KeepAlive is the interval of SSE keep-alive comments. Default 15s.
	KeepAlive time.Duration
	// ReleaseTimeout bounds the store writes of POST /leader/release and
	// of POST /leader/handoff. Default 10s.
	ReleaseTimeout time.Duration
	// Done, when closed, ends open /leader/watch streams (server shutdown).
	Done <-chan struct{}
	// AnyHost accepts a POST whatever its Host header names. By default a
	// POST must name a loopback host (see IsLoopbackHost), which refuses
	// browsers tricked by DNS rebinding. Set it only when the app API is
	// deliberately served beyond loopback, where remote clients name the
	// Pod. Cross-origin browser requests are refused either way.
	AnyHost bool
	// AppHealthy, when set, is the verdict of the sidecar's check of its
	// app, answered as appHealthy; nil answers null. A change of verdict
	// must also close the Elector's Changed channel (SitOut and Rejoin
	// do), so /leader/watch sends it.
	AppHealthy func() bool

	// writeTimeout bounds each SSE write; 0 means the writeTimeout
	// constant. Unexported: only this package's tests shorten it.
	writeTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = 10 * time.Second
	}
	if o.writeTimeout == 0 {
		o.writeTimeout = writeTimeout
	}
	return o
}

type api struct {
	e    Elector
	info Info
	opts Options
}

// NewAppHandler returns the full app API for the loopback listener.
func NewAppHandler(e Elector, info Info, opts Options) http.Handler {
	a := &api{e: e, info: info, opts: opts.withDefaults()}
	mux := a.readOnly()
	mux.HandleFunc("GET /{$}", a.leaderName)
	mux.HandleFunc("GET /leader", a.leader)
	mux.HandleFunc("GET /leader/watch", a.watch)
	mux.Handle("POST /leader/release", localOnly(http.HandlerFunc(a.release), a.opts.AnyHost))
	mux.Handle("POST /leader/handoff", localOnly(http.HandlerFunc(a.handoff), a.opts.AnyHost))
	return mux
}

// NewOpsHandler returns the read-only probes and metrics for the pod-IP
// listener.
func NewOpsHandler(e Elector, info Info, opts Options) http.Handler {
	a := &api{e: e, info: info, opts: opts.withDefaults()}
	return a.readOnly()
}

func (a *api) readOnly() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /leader/ready", a.leaderReady)
	if a.opts.Metrics != nil {
		mux.Handle("GET /metrics", a.opts.Metrics)
	}
	return mux
}

func (a *api) leader(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, newState(a.e.Status(), a.info, time.Now(), a.opts.AppHealthy))
}

// TokenHeader carries the fencing token of the term that a 200 of GET
// /leader/ready answers for: a sampler of the ops port can then order two
// replicas' claims (the body stays "leader", for probes and scripts).
const TokenHeader = "Leader-Sidecar-Token"

func (a *api) leaderReady(w http.ResponseWriter, _ *http.Request) {
	if s := a.e.Status(); s.Leader && time.Now().Before(s.ValidUntil) { // as newState judges it
		w.Header().Set(TokenHeader, strconv.FormatInt(s.Token, 10))
		writeText(w, http.StatusOK, "leader")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "not leader")
}

func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	if a.e.Healthy() {
		writeText(w, http.StatusOK, "ok")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "election loop wedged: no attempt finished recently")
}

func (a *api) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case !a.e.Healthy():
		writeText(w, http.StatusServiceUnavailable, "election loop wedged: no attempt finished recently")
	case !a.e.Status().ReachedStore:
		writeText(w, http.StatusServiceUnavailable, "store not reached yet")
	default:
		writeText(w, http.StatusOK, "ok")
	}
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.ReleaseTimeout)
	defer cancel()
	s, err := a.e.Release(ctx)
	st := newState(s, a.info, time.Now(), a.opts.AppHealthy)
	switch {
	case errors.Is(err, election.ErrNotLeader):
		st.Error = err.Error()
		writeJSON(w, http.StatusConflict, st)
	case err != nil:
		st.Error = err.Error()
		writeJSON(w, http.StatusServiceUnavailable, st)
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
