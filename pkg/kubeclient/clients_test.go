package kubeclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Pod request that runs out of time closes its client's connections;
// a renewal of the Lease in flight meanwhile, on the election's own
// client, still gets its answer.
func TestATimedOutPodRequestDoesNotAbortTheElectionsRequest(t *testing.T) {
	leaseAsked := make(chan struct{})
	podTimedOut := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/leases/"):
			close(leaseAsked)
			<-podTimedOut // answers only after the Pod request timed out
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"e","namespace":"ns","resourceVersion":"7"}}`))
		case strings.Contains(r.URL.Path, "/pods/"):
			<-r.Context().Done() // never answers
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	clients := NewClients(ResolveSource(kubeconfigFor(t, srv.URL), nil), Options{Timeout: 5 * time.Second})
	election, err := clients.Election()
	if err != nil {
		t.Fatal(err)
	}
	others, err := clients.Others()
	if err != nil {
		t.Fatal(err)
	}

	renewal := make(chan error, 1)
	go func() {
		_, err := election.Leases("ns").Get(context.Background(), "e", metav1.GetOptions{})
		renewal <- err
	}()
	<-leaseAsked
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = others.Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the Pod request: %v, want it to time out", err)
	}
	close(podTimedOut)
	if err := <-renewal; err != nil {
		t.Fatalf("the Lease request in flight failed after the Pod request timed out: %v", err)
	}
}
