package lease

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestNewClientRejects(t *testing.T) {
	if _, err := NewClient(nil, ClientOptions{}); err == nil {
		t.Fatal("NewClient(nil) succeeded")
	}
	for _, o := range []ClientOptions{{Timeout: -1}, {QPS: -1}, {Burst: -1}} {
		if _, err := NewClient(&rest.Config{Host: "https://127.0.0.1:1"}, o); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("NewClient(%+v): got %v, want an error about a negative option", o, err)
		}
	}
}

func TestNewClientSettings(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1000, Burst: 2000, Timeout: time.Hour}
	for _, c := range []struct {
		o   ClientOptions
		qps float32
	}{
		{ClientOptions{}, DefaultQPS},
		{ClientOptions{QPS: 7, Burst: 3, UserAgent: "leader-sidecar/1.2.3"}, 7},
	} {
		client, err := NewClient(cfg, c.o)
		if err != nil {
			t.Fatalf("NewClient(%+v): %v", c.o, err)
		}
		rc := client.Leases("").GetClient().(*rest.RESTClient)
		if got := rc.GetRateLimiter().QPS(); got != c.qps {
			t.Fatalf("NewClient(%+v): QPS %v, want %v", c.o, got, c.qps)
		}
	}
	if cfg.QPS != 1000 || cfg.Burst != 2000 || cfg.Timeout != time.Hour || cfg.WrapTransport != nil || cfg.UserAgent != "" {
		t.Fatalf("NewClient changed the config it was given: %+v", cfg)
	}
}

// slowServer answers every request after delay, and records user agents.
// A watch gets its headers at once and its (empty) stream after delay.
func slowServer(t *testing.T, delay time.Duration) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if r.URL.Query().Get("watch") != "true" {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), agents...) }
}

// TestNewClientTimeout: the timeout ends a slow request, but not a watch
// that stays open longer than the timeout.
func TestNewClientTimeout(t *testing.T) {
	srv, agents := slowServer(t, 1500*time.Millisecond)
	client, err := NewClient(&rest.Config{Host: srv.URL}, ClientOptions{Timeout: 200 * time.Millisecond, UserAgent: "leader-sidecar/test"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	leases := client.Leases("ns")
	began := time.Now()
	_, err = leases.Get(context.Background(), "x", metav1.GetOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > time.Second {
		t.Fatalf("slow Get: got %v after %v, want a deadline error after about 200ms", err, time.Since(began))
	}

	began = time.Now()
	w, err := leases.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	for range w.ResultChan() { // the server ends the stream after 1.5s
	}
	if d := time.Since(began); d < time.Second {
		t.Fatalf("the watch ended after %v, cut by the request timeout", d)
	}
	for _, a := range agents() {
		if a != "leader-sidecar/test" {
			t.Fatalf("user agent %q, want leader-sidecar/test", a)
		}
	}
}

func TestIsWatch(t *testing.T) {
	for raw, want := range map[string]bool{
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=true&fieldSelector=x":      true,
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=1":                         true,
		"/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases":                           true,
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases?fieldSelector=metadata.name%3Dx": false,
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/watch":                           false,
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/x?watch=false":                   false,
	} {
		u, err := url.Parse("https://h" + raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := isWatch(&http.Request{URL: u}); got != want {
			t.Errorf("isWatch(%s) = %v, want %v", raw, got, want)
		}
	}
}
