package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The app API under hostile or broken clients: malformed requests, huge
// bodies, hundreds of watchers and watchers that stop reading. None of them
// may crash the server, hold a goroutine forever or slow GET /leader down.

func TestBadInputMalformedRequests(t *testing.T) {
	f := newFake(leading(7, time.Hour))
	srv, _, _, errLog := newServer(t, f, testInfo, Options{}, 0)
	addr := srv.Listener.Addr().String()
	long := strings.Repeat("a", 2<<20) // above net/http's 1 MiB header limit
	cases := []struct {
		name, req string
		code      int
	}{
		{"garbage request line", "GARBAGE\r\n\r\n", 400},
		{"binary garbage", "\x00\xff\xfe\x01 / \x7f\r\n\r\n", 400},
		{"no protocol version", "GET /leader\r\n\r\n", 400},
		{"unknown protocol version", "GET /leader HTTP/9.9\r\nHost: x\r\n\r\n", 505},
		{"no Host header", "GET /leader HTTP/1.1\r\n\r\n", 400},
		{"unknown method", "BREW /leader HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"method with invalid characters", "G(T /leader HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"header without a colon", "GET /leader HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"header name with a space", "GET /leader HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400},
		{"NUL in a header value", "GET /leader HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400},
		{"negative Content-Length", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"Content-Length not a number", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n", 400},
		{"two different Content-Lengths", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"unsupported Transfer-Encoding", "POST /leader/release HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"very long URL", "GET /leader?" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 431},
		{"very long header", "GET /leader HTTP/1.1\r\nHost: x\r\nX-Long: " + long + "\r\n\r\n", 431},
		{"very many headers", "GET /leader HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-N: v\r\n", 200_000) + "\r\n", 431},
		{"wrong method on release", "GET /leader/release HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"unknown path", "GET /etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"dot segments are cleaned by a redirect", "GET /leader/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 307},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, c.req)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, c.code)
			}
		})
	}
	if f.Releases() != 0 {
		t.Fatalf("malformed requests released the lease %d times", f.Releases())
	}
	if m := getLeader(t, srv.Client(), srv.URL); m["leader"] != true || m["token"] != float64(7) {
		t.Fatalf("after the malformed requests GET /leader answered %v", m)
	}
	if s := errLog.String(); strings.Contains(s, "panic") {
		t.Fatalf("the server logged a panic:\n%s", s)
	}
}

// The answers are compared whole, so time stands still (synctest) and
// validForMs is the same in each.
func TestBadInputQueryStringsAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(leading(7, time.Hour))
		h := NewAppHandler(f, testInfo, Options{})
		want := serve(h, "GET", "/leader").Body.String()
		for _, q := range []string{"?leader=false&token=99", "?token", "?%zz", "?" + strings.Repeat("x=1&", 10000)} {
			rec := serve(h, "GET", "/leader"+q)
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 200 || m["leader"] != true || m["token"] != float64(7) {
				t.Fatalf("GET /leader%.40s: %d %q", q, rec.Code, rec.Body)
			}
			if rec.Body.String() != want {
				t.Fatalf("GET /leader%.40s answered %q, GET /leader %q", q, rec.Body, want)
			}
			if rec := serve(h, "GET", "/leader/ready"+q); rec.Code != 200 {
				t.Fatalf("GET /leader/ready%.40s: %d", q, rec.Code)
			}
		}
		if rec := serve(h, "POST", "/leader/release?holdOff=0s&leader=true"); rec.Code != 200 || f.Releases() != 1 {
			t.Fatalf("POST /leader/release with a query: %d after %d releases", rec.Code, f.Releases())
		}
	})
}

// A release with a huge body is answered at once, without reading the body:
// the handler never touches it, and net/http hangs up rather than drain more
// than a little of it. This is measured on the server's side of the
// connection (bytes read, counted by the listener) and on the client's (the
// answer arrives while it is still sending), rather than by the handler's
// allocations, which a concurrent server makes too noisy to bound tightly.
func TestBadInputHugeReleaseBody(t *testing.T) {
	const size = 50 << 20
	for _, framing := range []string{"Content-Length: " + fmt.Sprint(size), "Transfer-Encoding: chunked"} {
		t.Run(strings.Fields(framing)[0], func(t *testing.T) {
			f := newFake(leading(4, time.Hour))
			srv, _, ln, _ := newServer(t, f, testInfo, Options{}, 0)
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, "POST /leader/release HTTP/1.1\r\nHost: 127.0.0.1\r\n"+framing+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			var sent atomic.Int64
			writeErr := make(chan error, 1)
			go func() {
				chunk := bytes.Repeat([]byte("x"), 64<<10)
				if strings.HasPrefix(framing, "Transfer") {
					chunk = append(fmt.Appendf(nil, "%x\r\n", len(chunk)), append(chunk, "\r\n"...)...)
				}
				for sent.Load() < size {
					n, err := c.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						writeErr <- err
						return
					}
				}
				writeErr <- nil
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to the release: %v", err)
			}
			sentAtAnswer := sent.Load()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if resp.StatusCode != 200 || m["leader"] != false || f.Releases() != 1 {
				t.Fatalf("release answered %d %v after %d releases", resp.StatusCode, m, f.Releases())
			}
			if sentAtAnswer >= size {
				t.Fatalf("the answer came only after the whole %d-byte body was sent", size)
			}
			if err := <-writeErr; err == nil {
				t.Fatalf("the server accepted all %d bytes of a body nobody reads", size)
			}
			read := ln.read.Load()
			t.Logf("answered after the client sent %d KiB; the server read %d KiB of %d MiB; the sender then failed",
				sentAtAnswer>>10, read>>10, size>>20)
			if read > 2<<20 {
				t.Fatalf("the server read %d bytes of a body nobody uses", read)
			}
		})
	}
}

func TestBadInputManyWatchers(t *testing.T) {
	const n = 300
	f := newFake(following("other_2"))
	srv, tr, _, _ := newServer(t, f, testInfo, Options{}, 0)
	baseline := runtime.NumGoroutine()

	transport := &http.Transport{MaxIdleConnsPerHost: -1}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	watchers := make([]*watcher, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range watchers {
		wg.Go(func() {
			w, err := openWatcher(ctx, hc, srv.URL)
			if err == nil {
				watchers[i] = w
				var m map[string]any
				if m, err = w.next(30 * time.Second); err == nil && (m["leader"] != false || m["holder"] != "other_2") {
					err = fmt.Errorf("first event %v, want a follower of other_2", m)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("watcher %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tr.waitCount(t, n, 10*time.Second)

	// GET /leader on its own connection while all streams are open.
	reader := &http.Client{Transport: &http.Transport{}}
	defer reader.CloseIdleConnections()
	var took []time.Duration
	for range 200 {
		start := time.Now()
		m := getLeader(t, reader, srv.URL)
		took = append(took, time.Since(start))
		if m["leader"] != false || m["holder"] != "other_2" {
			t.Fatalf("GET /leader with %d watchers open: %v", n, m)
		}
	}
	t.Logf("GET /leader with %d watchers open: p50 %v, p99 %v, max %v", n,
		percentile(took, 0.5), percentile(took, 0.99), percentile(took, 1))

	f.Set(leading(9, time.Hour))
	for i, w := range watchers {
		m, err := w.next(30 * time.Second)
		if err != nil || m["leader"] != true || m["token"] != float64(9) {
			t.Fatalf("watcher %d after the change: %v, %v; want leader with token 9", i, m, err)
		}
	}
	if m := getLeader(t, reader, srv.URL); m["leader"] != true || m["token"] != float64(9) {
		t.Fatalf("GET /leader after the change: %v", m)
	}

	// Clients hang up: every handler (and connection goroutine) ends.
	cancel()
	for _, w := range watchers {
		w.resp.Body.Close()
		<-w.done
	}
	tr.waitCount(t, 0, 10*time.Second)
	transport.CloseIdleConnections()
	reader.CloseIdleConnections()
	left := waitGoroutines(t, baseline+5, 10*time.Second)
	t.Logf("goroutines: %d before the watchers, %d after they closed", baseline, left)
}

// A watcher that stops reading is dropped once a write blocks for the write
// timeout, and meanwhile the other watchers and GET /leader carry on.
//
// The test shortens the timeout through Options.writeTimeout, unexported so
// that only this package's tests can set it (10s is the product's value and
// stays a constant), and shrinks the server's send buffer and the slow
// client's receive buffer so that a few events fill them.
func TestBadInputSlowWatcherIsDropped(t *testing.T) {
	// Long enough for the paced changes below to pass the point where the
	// slow watcher's buffers are full on a loaded machine.
	const timeout = time.Second
	info := Info{Lease: strings.Repeat("l", 4<<10), Backend: "sqlite"} // 4 KiB events
	f := newFake(leading(1, time.Hour))
	srv, tr, _, _ := newServer(t, f, info, Options{writeTimeout: timeout, KeepAlive: time.Hour}, 4<<10)

	slow, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(slow, "GET /leader/watch HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	slowDone := tr.handlerOf(t, slow.LocalAddr().String())

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	fast, err := openWatcher(ctx, hc, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); fast.resp.Body.Close(); <-fast.done }()
	if _, err := fast.next(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	// Changes, paced so that the fast watcher sees each: every one is an
	// event the slow watcher does not read. Its buffers (4 KiB each way)
	// hold two 4 KiB events: after stuckAfter, its writes block.
	const stuckAfter = 10
	start := time.Now()
	var token int64 = 1
	received := 0
	var droppedAfter time.Duration
	for droppedAfter == 0 {
		select {
		case <-slowDone:
			droppedAfter = time.Since(start)
			continue
		default:
		}
		if time.Since(start) > timeout+5*time.Second {
			t.Fatalf("a watcher that reads nothing was not dropped within %v (%d events sent)", time.Since(start), token-1)
		}
		token++
		f.Set(leading(token, time.Hour))
		m, err := fast.next(5 * time.Second)
		if err != nil || m["token"] != float64(token) {
			t.Fatalf("the reading watcher, change %d: %v, %v", token, m, err)
		}
		received++
		if received == stuckAfter {
			if m := getLeader(t, hc, srv.URL); m["token"] != float64(token) {
				t.Fatalf("GET /leader while a watcher is stuck: %v, want token %d", m, token)
			}
		}
	}
	t.Logf("the watcher that never reads was dropped %v after the changes began (write timeout %v); the reading one got all %d changes meanwhile",
		droppedAfter, timeout, received)
	if received < stuckAfter {
		t.Fatalf("only %d changes reached the reading watcher before the slow one was dropped", received)
	}
	f.Set(following("final_9"))
	if m, err := fast.next(5 * time.Second); err != nil || m["holder"] != "final_9" {
		t.Fatalf("after the drop, the reading watcher got %v, %v", m, err)
	}
	tr.waitCount(t, 1, 5*time.Second)
}

// watcher is one client of /leader/watch, reading events in the background.
type watcher struct {
	resp   *http.Response
	events chan map[string]any
	done   chan struct{}
}

func openWatcher(ctx context.Context, hc *http.Client, url string) (*watcher, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/leader/watch", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	w := &watcher{resp: resp, events: make(chan map[string]any, 1024), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.events)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) != nil {
				m = map[string]any{"undecodable": data}
			}
			select {
			case w.events <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return w, nil
}

func (w *watcher) next(within time.Duration) (map[string]any, error) {
	select {
	case m, ok := <-w.events:
		if !ok {
			return nil, errors.New("stream ended")
		}
		return m, nil
	case <-time.After(within):
		return nil, fmt.Errorf("no event within %v", within)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// waitGoroutines polls until at most max goroutines run.
func waitGoroutines(t *testing.T, max int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := runtime.NumGoroutine()
		if n <= max {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines %v later, want at most %d", n, within, max)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

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
