package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer collects the server's error log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countingListener counts the bytes the server reads from its connections
// and can shrink their send buffers, so that a client that stops reading
// blocks the server's writes after a few kilobytes instead of megabytes.
type countingListener struct {
	net.Listener
	read     atomic.Int64
	sndBytes int // SO_SNDBUF of accepted connections; 0 leaves the default
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok && l.sndBytes > 0 {
		if err := tc.SetWriteBuffer(l.sndBytes); err != nil {
			c.Close()
			return nil, err
		}
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// watchTracker wraps the handler and follows the /leader/watch handlers
// that are running, by the client's address.
type watchTracker struct {
	next   http.Handler
	mu     sync.Mutex
	active map[string]chan struct{} // closed when that client's handler returned
	count  atomic.Int64
}

func track(h http.Handler) *watchTracker {
	return &watchTracker{next: h, active: map[string]chan struct{}{}}
}

func (w *watchTracker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/leader/watch" {
		w.next.ServeHTTP(rw, r)
		return
	}
	done := make(chan struct{})
	w.mu.Lock()
	w.active[r.RemoteAddr] = done
	w.mu.Unlock()
	w.count.Add(1)
	defer func() {
		w.count.Add(-1)
		close(done)
	}()
	w.next.ServeHTTP(rw, r)
}

// handlerOf returns the done channel of the watch handler serving the
// client at addr, polling until that handler has started.
func (w *watchTracker) handlerOf(t *testing.T, addr string) <-chan struct{} {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		w.mu.Lock()
		done := w.active[addr]
		w.mu.Unlock()
		if done != nil {
			return done
		}
	}
	t.Fatalf("no watch handler started for %s within 10s", addr)
	return nil
}

// waitCount polls until n watch handlers are running.
func (w *watchTracker) waitCount(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for w.count.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d watch handlers running %v later, want %d", w.count.Load(), within, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newServer serves the app API of f on a real loopback server whose error
// log the test can read. Streams end and the server closes at cleanup.
func newServer(t *testing.T, f *fakeElector, info Info, opts Options, sndBytes int) (*httptest.Server, *watchTracker, *countingListener, *syncBuffer) {
	t.Helper()
	done := make(chan struct{})
	opts.Done = done
	tr := track(NewAppHandler(f, info, opts))
	srv := httptest.NewUnstartedServer(tr)
	ln := &countingListener{Listener: srv.Listener, sndBytes: sndBytes}
	srv.Listener = ln
	errLog := &syncBuffer{}
	srv.Config.ErrorLog = log.New(errLog, "", 0)
	srv.Start()
	t.Cleanup(func() {
		close(done)
		srv.Close()
		if s := errLog.String(); strings.Contains(s, "panic") {
			t.Errorf("the server logged a panic:\n%s", s)
		}
	})
	return srv, tr, ln, errLog
}

// rawExchange sends req on a new connection and reads one response. The
// request is written while the response is read, as a server may answer
// (and hang up) before it has read everything.
func rawExchange(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = io.WriteString(c, req) // the server may hang up first
	}()
	defer func() { c.Close(); <-wrote }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request %.60q...: no response: %v", req, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp, string(body)
}

func getLeader(t *testing.T, hc *http.Client, url string) map[string]any {
	t.Helper()
	resp, err := hc.Get(url + "/leader")
	if err != nil {
		t.Fatalf("GET /leader: %v", err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); resp.StatusCode != 200 || err != nil {
		t.Fatalf("GET /leader: %d, %v", resp.StatusCode, err)
	}
	return m
}
