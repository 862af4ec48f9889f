package kubeclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// defaultDialer dials as client-go does when a config names no dialer.
var defaultDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// freshAfterTimeout closes every connection of the client when a request
// fails because its deadline passed, so that the next request does not
// wait on a connection that may be dead. A request cancelled for another
// reason (the sidecar shutting down) closes nothing.
type freshAfterTimeout struct {
	next     http.RoundTripper
	closeAll func()
}

// RoundTrip implements http.RoundTripper.
func (f *freshAfterTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(req)
	if err != nil && errors.Is(req.Context().Err(), context.DeadlineExceeded) {
		f.closeAll()
	}
	return resp, err
}

// WrappedRoundTripper lets client-go see the transport underneath.
func (f *freshAfterTimeout) WrappedRoundTripper() http.RoundTripper { return f.next }

// timeoutTransport bounds every request except watches, from sending it
// to reading the last byte of its response.
type timeoutTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// WrappedRoundTripper lets client-go see the transport underneath.
func (t *timeoutTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// isWatch reports whether req is a watch: a long-lived stream of events.
func isWatch(req *http.Request) bool {
	switch strings.ToLower(req.URL.Query().Get("watch")) {
	case "true", "1":
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

// cancelOnClose releases a request's timeout once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
