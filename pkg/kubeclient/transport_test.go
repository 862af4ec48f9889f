package kubeclient

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// connCounter is an HTTP/2 API server stand-in that never answers a
// request for the Lease "hang" and answers every other with 404. It
// counts the connections clients open.
type connCounter struct {
	srv *httptest.Server

	mu     sync.Mutex
	opened int
	protos map[string]bool
}

func newConnCounter(t *testing.T) *connCounter {
	c := &connCounter{protos: map[string]bool{}}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.protos[r.Proto] = true
		c.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/leases/hang") {
			<-r.Context().Done() // the client gave up, or closed the connection
			return
		}
		w.Header().Set("Content-Type", "application/json")
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`, http.StatusNotFound)
	}))
	c.srv.EnableHTTP2 = true
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.opened++
			c.mu.Unlock()
		}
	}
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *connCounter) connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened
}

func (c *connCounter) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
	return &rest.Config{Host: c.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// TestATimedOutRequestMakesTheNextOneDialAnew: over HTTP/2 every request
// shares one connection. A request that runs out of time, by the client's
// timeout or by its caller's deadline, closes it, so the next request
// dials a new one instead of queueing on a connection that may be dead. A
// request cancelled for another reason leaves the connection open.
func TestATimedOutRequestMakesTheNextOneDialAnew(t *testing.T) {
	srv := newConnCounter(t)
	client, err := NewClient(srv.config(), Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	leases := client.Leases("ns")
	get := func(ctx context.Context, name string) error {
		_, err := leases.Get(ctx, name, metav1.GetOptions{})
		return err
	}
	answered := func(want int) {
		t.Helper()
		if err := get(context.Background(), "x"); !apierrors.IsNotFound(err) {
			t.Fatalf("Get: %v, want NotFound", err)
		}
		if got := srv.connections(); got != want {
			t.Fatalf("%d connections opened so far, want %d", got, want)
		}
	}

	answered(1)
	answered(1) // the connection is reused

	if err := get(context.Background(), "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a request never answered: %v, want the client's timeout", err)
	}
	answered(2)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := get(ctx, "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with a deadline, never answered: %v, want the caller's deadline", err)
	}
	answered(3)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := get(ctx, "hang"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get cancelled: %v, want context.Canceled", err)
	}
	answered(3)

	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !srv.protos["HTTP/2.0"] || len(srv.protos) != 1 {
		t.Fatalf("requests came over %v, want HTTP/2.0 only", srv.protos)
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
