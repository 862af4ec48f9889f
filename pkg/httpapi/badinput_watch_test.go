package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

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
	const timeout = 300 * time.Millisecond
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
	// event the slow watcher does not read.
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
		if received == 50 { // the slow watcher's buffers are full by now
			if m := getLeader(t, hc, srv.URL); m["token"] != float64(token) {
				t.Fatalf("GET /leader while a watcher is stuck: %v, want token %d", m, token)
			}
		}
	}
	t.Logf("the watcher that never reads was dropped %v after the changes began (write timeout %v); the reading one got all %d changes meanwhile",
		droppedAfter, timeout, received)
	if received < 50 {
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
