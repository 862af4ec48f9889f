package fencesuite_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi/httpapitest"
)

// elector is the scripted elector these tests drive.
type elector = httpapitest.Elector

func newElector(s election.Status) *elector { return httpapitest.NewElector(s) }

func leading(token int64, validFor time.Duration) election.Status {
	return httpapitest.Leading("app-0_1", token, validFor)
}

func following(holder string) election.Status { return httpapitest.Following("app-0_1", holder) }

var info = httpapi.Info{Lease: "default/billing", Backend: "lease"}

// sidecar is the real app API on a scripted elector, reached through an
// in-process transport, so that tests run on synctest's virtual clock.
type sidecar struct {
	*elector
	*transport
	client *fence.Client
}

func newSidecar(t *testing.T, s election.Status) *sidecar {
	e := newElector(s)
	return newScriptedSidecar(t, e, httpapi.NewAppHandler(e, info, httpapi.Options{}))
}

func newScriptedSidecar(t *testing.T, e *elector, h http.Handler) *sidecar {
	tr := &transport{handler: h}
	c, err := fence.NewClient("http://sidecar.test", fence.WithHTTPClient(&http.Client{Transport: tr, Timeout: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return &sidecar{elector: e, transport: tr, client: c}
}

// transport serves requests with an http.Handler in this process, streaming
// each response through a pipe.
type transport struct {
	handler http.Handler

	mu       sync.Mutex
	down     error    // while set, requests fail with it
	open     []func() // break each open response
	requests int
}

// setDown makes requests fail with err (nil: answer again).
func (tr *transport) setDown(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.down = err
}

// breakStreams cuts every open response short, as a sidecar restart would.
func (tr *transport) breakStreams() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, cut := range tr.open {
		cut()
	}
	tr.open = nil
}

func (tr *transport) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.requests
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	tr.requests++
	down := tr.down
	tr.mu.Unlock()
	if down != nil {
		return nil, down
	}
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	tr.mu.Lock()
	tr.open = append(tr.open, func() { pw.CloseWithError(io.ErrUnexpectedEOF); cancel() })
	tr.mu.Unlock()
	go func() {
		defer cancel()
		tr.handler.ServeHTTP(w, req.Clone(ctx))
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	stop := context.AfterFunc(req.Context(), func() { pr.CloseWithError(req.Context().Err()) })
	select {
	case <-w.ready:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, ContentLength: -1,
		Body: pipeBody{pr, func() { stop(); cancel() }}, Request: req,
	}, nil
}

type pipeBody struct {
	*io.PipeReader
	done func()
}

func (b pipeBody) Close() error {
	b.done()
	return b.PipeReader.Close()
}

type pipeWriter struct {
	header, sent http.Header
	code         int
	pw           *io.PipeWriter
	ready        chan struct{}
	once         sync.Once
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() { w.code, w.sent = code, w.header.Clone(); close(w.ready) })
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {}
