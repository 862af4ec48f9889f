package process

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The real sidecar under abusive clients: hundreds of watchers, slowloris
// connections and malformed requests at once. GET /leader keeps answering
// correctly, the process lives, and once the clients are gone its goroutine
// count returns to where it was.

// readHeaderTimeout is the app server's http.Server.ReadHeaderTimeout.
const readHeaderTimeout = 5 * time.Second

// goroutinesOf reads go_goroutines from the sidecar's /metrics.
func goroutinesOf(t *testing.T, hc *http.Client, base string) int {
	t.Helper()
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("go_goroutines %q: %v", v, err)
			}
			return int(f)
		}
	}
	t.Fatalf("no go_goroutines in /metrics (status %d)", resp.StatusCode)
	return 0
}

// leaderLatencies sends n GET /leader one after another on one keep-alive
// connection; every one must answer that this sidecar leads with token.
func leaderLatencies(t *testing.T, base string, token int64, n int) []time.Duration {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	took := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		resp, err := hc.Get(base + "/leader")
		if err != nil {
			t.Fatalf("GET /leader %d of %d: %v", i+1, n, err)
		}
		var st sidecartest.State
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		took = append(took, time.Since(start))
		if err != nil || resp.StatusCode != 200 || !st.Leader || st.Token == nil || *st.Token != token {
			t.Fatalf("GET /leader %d of %d: %d %+v %v, want leader with token %d", i+1, n, resp.StatusCode, st, err, token)
		}
	}
	return took
}

func latencySummary(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(float64(len(s))*p))].Round(time.Microsecond) }
	return fmt.Sprintf("n=%d p50 %v p99 %v max %v", len(s), at(0.5), at(0.99), s[len(s)-1].Round(time.Microsecond))
}

// openWatcher opens GET /leader/watch and waits for its first event, which
// must say that this sidecar leads with token.
func openWatcher(ctx context.Context, hc *http.Client, base string, token int64) (*sidecartest.Watch, error) {
	first := make(chan error, 1)
	w, err := sidecartest.OpenWatch(ctx, hc, base, func(n int, data string) {
		if n != 1 {
			return
		}
		if st, err := sidecartest.ParseState([]byte(data)); err != nil || !st.Leader || st.Token == nil || *st.Token != token {
			first <- fmt.Errorf("first event %q, want leader with token %d", data, token)
			return
		}
		first <- nil
	})
	if err != nil {
		return nil, err
	}
	select {
	case err = <-first:
	case <-w.Ended():
		select {
		case err = <-first: // the first event came just before the end
		default:
			err = w.Err()
		}
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("no first event within 30s")
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// slowloris opens a connection and sends a request header one byte a
// second, never finishing it; it reports how long the server kept the
// connection open.
func slowloris(addr string, closedAfter chan<- time.Duration) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		closedAfter <- -1
		return
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(start.Add(30 * time.Second))
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(io.Discard, c) // returns once the server hangs up
	}()
	header := "GET /leader HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("z", 60)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		if _, err := c.Write([]byte{header[i%len(header)]}); err != nil {
			break
		}
		select {
		case <-readDone:
		case <-tick.C:
			continue
		}
		break
	}
	<-readDone
	if time.Since(start) >= 29*time.Second {
		closedAfter <- -1
		return
	}
	closedAfter <- time.Since(start)
}

// malformed is one raw request and the status class it must get.
type malformed struct {
	name, req string
	class     int // status / 100
}

var malformedRequests = func() []malformed {
	long := strings.Repeat("a", 2<<20)
	return []malformed{
		{"garbage", "GARBAGE\r\n\r\n", 4},
		{"binary", "\x00\xff\xfe\x01 / \x7f\r\n\r\n", 4},
		{"no Host", "GET /leader HTTP/1.1\r\n\r\n", 4},
		{"unknown method", "BREW /leader HTTP/1.1\r\nHost: x\r\n\r\n", 4},
		{"bad header", "GET /leader HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 4},
		{"2 MiB URL", "GET /leader?" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 4},
		{"2 MiB header", "GET /leader HTTP/1.1\r\nHost: x\r\nX-Long: " + long + "\r\n\r\n", 4},
		{"huge body on a GET-only path", "POST /leader HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n" + strings.Repeat("b", 1<<20), 4},
		{"bad Content-Length", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 4},
		{"unsupported Transfer-Encoding", "POST /leader/release HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 5},
	}
}()

// send writes m on a new connection and returns the status of the answer.
func (m malformed) send(addr string) (int, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = io.WriteString(c, m.req) // the server may hang up first
	}()
	defer func() { c.Close(); <-wrote }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestBadInputSidecarUnderAbuse(t *testing.T) {
	t.Parallel()
	const watchers, slowClients = 300, 20
	s := sidecartest.Start(t, sidecartest.DBPath(t))
	_, token := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 30*time.Second)
	base := "http://" + s.Addr()
	metrics := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer metrics.CloseIdleConnections()
	baseline := goroutinesOf(t, metrics, base)
	quiet := leaderLatencies(t, base, token, 300)

	// 300 watchers, each confirming the current state first.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wtr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer wtr.CloseIdleConnections()
	wc := &http.Client{Transport: wtr}
	ws := make([]*sidecartest.Watch, watchers)
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i := range ws {
		wg.Go(func() {
			w, err := openWatcher(ctx, wc, base, token)
			if err != nil {
				errs <- fmt.Errorf("watcher %d: %w", i, err)
				return
			}
			ws[i] = w
		})
	}
	wg.Wait()
	close(errs)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.Close()
			}
		}
	}()
	for err := range errs {
		t.Fatal(err)
	}
	withWatchers := goroutinesOf(t, metrics, base)

	// Slowloris clients and malformed requests, running while GET /leader
	// is measured.
	closedAfter := make(chan time.Duration, slowClients)
	for range slowClients {
		go slowloris(s.Addr(), closedAfter)
	}
	stopMalformed := make(chan struct{})
	malformedDone := make(chan error, 1)
	var malformedSent atomic.Int64
	go func() {
		for {
			for _, m := range malformedRequests {
				select {
				case <-stopMalformed:
					malformedDone <- nil
					return
				default:
				}
				code, err := m.send(s.Addr())
				if err != nil || code/100 != m.class {
					malformedDone <- fmt.Errorf("%s: status %d, %v; want %dxx", m.name, code, err, m.class)
					return
				}
				malformedSent.Add(1)
			}
		}
	}()
	loaded := leaderLatencies(t, base, token, 1000)
	close(stopMalformed)
	if err := <-malformedDone; err != nil {
		t.Fatalf("malformed request: %v", err)
	}
	t.Logf("GET /leader, quiet:       %s", latencySummary(quiet))
	t.Logf("GET /leader, under abuse: %s (%d watchers open, %d slowloris connections, %d malformed requests meanwhile)",
		latencySummary(loaded), watchers, slowClients, malformedSent.Load())

	// The server hangs up on every slowloris client at its header timeout.
	var slowest time.Duration
	for i := range slowClients {
		d := <-closedAfter
		if d < 0 || d > readHeaderTimeout+3*time.Second {
			t.Fatalf("slowloris connection %d: kept open %v, want closed by the %v header timeout", i, d, readHeaderTimeout)
		}
		slowest = max(slowest, d)
	}
	t.Logf("slowloris connections closed by the server after at most %v", slowest.Round(time.Millisecond))

	// The watchers were all kept, and all are still served.
	for i, w := range ws {
		select {
		case <-w.Ended():
			t.Fatalf("watcher %d was dropped during the test: %v", i, w.Err())
		default:
		}
	}
	if !s.Alive() {
		t.Fatal("the sidecar died")
	}
	if st, err := s.Leader(); err != nil || !st.Leader || st.Token == nil || *st.Token != token {
		t.Fatalf("after the abuse: %+v, %v; want leader with token %d", st, err, token)
	}

	// Clients hang up: the sidecar's goroutines return to the baseline.
	cancel()
	for _, w := range ws {
		w.Close()
		<-w.Ended()
	}
	wtr.CloseIdleConnections()
	var after int
	deadline := time.Now().Add(30 * time.Second)
	for after = goroutinesOf(t, metrics, base); after > baseline+10; after = goroutinesOf(t, metrics, base) {
		if time.Now().After(deadline) {
			t.Fatalf("go_goroutines %d 30s after every client left, baseline %d", after, baseline)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("go_goroutines: %d before, %d with %d watchers, %d after all clients left", baseline, withWatchers, watchers, after)
	if withWatchers < baseline+watchers {
		t.Fatalf("go_goroutines %d with %d watchers open, baseline %d: the count does not see the streams", withWatchers, watchers, baseline)
	}
	if !s.Alive() {
		t.Fatal("the sidecar died")
	}
	if st, err := s.Leader(); err != nil || !st.Leader || st.Token == nil || *st.Token != token {
		t.Fatalf("at the end: %+v, %v; want leader with token %d", st, err, token)
	}
}
