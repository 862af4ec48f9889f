package apphealth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// script is a check that answers from a list of results, one per call
// (true: healthy), repeating the last one, and records the verdicts.
type script struct {
	mu       sync.Mutex
	results  []bool
	calls    int
	verdicts []string // "healthy@<time since start>" or "unhealthy@..."
	start    time.Time
}

func (s *script) check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.results)-1)
	s.calls++
	if s.results[i] {
		return nil
	}
	return fmt.Errorf("check %d failed", s.calls)
}

func (s *script) onChange(healthy bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	word := "unhealthy"
	if healthy {
		word = "healthy"
	}
	if healthy != (err == nil) {
		word += "(inconsistent error)"
	}
	s.verdicts = append(s.verdicts, fmt.Sprintf("%s@%v", word, time.Since(s.start)))
}

// run runs a Monitor over the scripted results for d and returns the
// verdicts with the time they were given.
func run(t *testing.T, results []bool, d time.Duration) []string {
	t.Helper()
	var got []string
	synctest.Test(t, func(t *testing.T) {
		s := &script{results: results, start: time.Now()}
		m, err := New(Config{Check: s.check, OnChange: s.onChange}) // 2s, threshold 3
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		m.Run(ctx)
		got = s.verdicts
	})
	return got
}

func TestFirstSuccessIsHealthyAtOnce(t *testing.T) {
	got := run(t, []bool{true}, 10*time.Second)
	if want := []string{"healthy@0s"}; !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
}

func TestUnhealthyUntilTheFirstSuccess(t *testing.T) {
	got := run(t, []bool{false, false, false, false, true}, 20*time.Second)
	if want := []string{"healthy@8s"}; !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v (no verdict before, then the first success)", got, want)
	}
}

func TestFlipsOnlyAfterThresholdChecksInARow(t *testing.T) {
	// healthy at 0; two failures (2s, 4s) are not enough; a success
	// resets; three failures (8s, 10s, 12s) make it unhealthy at 12s; two
	// successes are not enough, one failure resets, three successes (20s,
	// 22s, 24s) make it healthy at 24s.
	results := []bool{true, false, false, true, false, false, false, true, true, false, true, true, true}
	got := run(t, results, 30*time.Second)
	if want := []string{"healthy@0s", "unhealthy@12s", "healthy@24s"}; !slices.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
}

func TestHealthyReportsTheLastFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := errors.New("app says no")
		m, err := New(Config{Check: func(context.Context) error { return failing }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go m.Run(ctx)
		synctest.Wait()
		if ok, err := m.Healthy(); ok || !errors.Is(err, failing) {
			t.Fatalf("Healthy() = %v, %v; want false, %v", ok, err, failing)
		}
		cancel()
	})
}

func TestHTTPCheck(t *testing.T) {
	var status int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if status == 0 {
			time.Sleep(300 * time.Millisecond) // slower than the timeout below
			return
		}
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	check, err := httpCheck(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status int
		ok     bool
		text   string
	}{
		{200, true, ""}, {204, true, ""}, {302, true, ""}, {399, true, ""},
		{404, false, "status 404"}, {500, false, "status 500"},
		{0, false, "deadline exceeded"},
	} {
		mu.Lock()
		status = c.status
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := check(ctx)
		cancel()
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), c.text) {
			t.Errorf("status %d: error %v, want ok=%v containing %q", c.status, err, c.ok, c.text)
		}
	}
	srv.Close()
	if err := check(context.Background()); err == nil || !strings.Contains(err.Error(), "GET "+srv.URL) {
		t.Errorf("a closed server: %v, want an error naming the URL", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "a URL is required"},
		{Config{URL: "localhost:8080/healthz"}, "must be http:// or https://"}, {Config{URL: "127.0.0.1:8080/healthz"}, "first path segment"},
		{Config{URL: "ftp://127.0.0.1/x"}, "must be http:// or https://"},
		{Config{URL: "http://127.0.0.1/", Period: -time.Second}, "period must be positive"},
		{Config{URL: "http://127.0.0.1/", Threshold: -1}, "threshold must be at least 1"},
		{Config{URL: "http://127.0.0.1/", Timeout: -time.Second}, "timeout must be positive"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
}
