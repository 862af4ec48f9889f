package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// readEvent reads one SSE event's data line, skipping comments.
func readEvent(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		return m
	}
}

func TestWatchDeliversTheStateThenEachChange(t *testing.T) {
	f := newFake(following(""))
	done := make(chan struct{})
	srv := httptest.NewServer(NewAppHandler(f, testInfo, Options{Done: done}))
	defer srv.Close()
	defer close(done)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/leader/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r := bufio.NewReader(resp.Body)
	if m := readEvent(t, r); m["leader"] != false {
		t.Fatalf("first event %v, want the current state (not leader)", m)
	}
	f.Set(leading(9, time.Hour))
	if m := readEvent(t, r); m["leader"] != true || m["token"] != float64(9) {
		t.Fatalf("second event %v, want leader with token 9", m)
	}
	f.Set(following("other_3"))
	if m := readEvent(t, r); m["leader"] != false || m["holder"] != "other_3" {
		t.Fatalf("third event %v, want a follower of other_3", m)
	}
}

// streamWriter is a ResponseWriter whose body a test reads as it is written.
type streamWriter struct {
	header http.Header
	mu     sync.Mutex
	body   strings.Builder
}

func (s *streamWriter) Header() http.Header { return s.header }
func (s *streamWriter) WriteHeader(int)     {}
func (s *streamWriter) Flush()              {}
func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.Write(p)
}

func (s *streamWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.String()
}

func TestWatchAnnouncesTheLapseAndKeepsAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(leading(5, 10*time.Second))
		done := make(chan struct{})
		h := NewAppHandler(f, testInfo, Options{Done: done, KeepAlive: 4 * time.Second})
		w := &streamWriter{header: http.Header{}}
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			h.ServeHTTP(w, httptest.NewRequest("GET", "/leader/watch", nil))
		}()

		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		before := w.String()
		if strings.Count(before, "data: ") != 1 || strings.Count(before, ": keep-alive") != 2 {
			t.Fatalf("before the lapse, stream is %q: want one event and two keep-alives", before)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		events := strings.Split(strings.TrimSpace(w.String()), "\n\n")
		last := events[len(events)-1]
		if !strings.HasPrefix(last, "data: ") || !strings.Contains(last, `"leader":false`) || !strings.Contains(last, `"token":null`) {
			t.Fatalf("at validUntil the last event is %q, want leader:false with a null token", last)
		}

		close(done)
		<-finished
	})
}
