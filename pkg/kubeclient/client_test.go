package kubeclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestSchemeHoldsOnlyWhatTheSidecarUses: the kinds outside meta are the
// four the sidecar sends or receives, in their three groups.
func TestSchemeHoldsOnlyWhatTheSidecarUses(t *testing.T) {
	want := map[string]bool{
		"coordination.k8s.io/v1, Kind=Lease": true, "coordination.k8s.io/v1, Kind=LeaseList": true,
		"/v1, Kind=Pod": true, "events.k8s.io/v1, Kind=Event": true,
	}
	meta := map[string]bool{}
	for _, k := range []string{"ListOptions", "GetOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "DeleteOptions",
		"WatchEvent", "Status", "APIVersions", "APIGroupList", "APIGroup", "APIResourceList", "InternalEvent"} {
		meta[k] = true
	}
	scheme := theKinds().scheme
	for gvk := range scheme.AllKnownTypes() {
		if meta[gvk.Kind] {
			continue
		}
		if !want[gvk.String()] {
			t.Errorf("the scheme knows %s", gvk)
		}
		delete(want, gvk.String())
	}
	if len(want) > 0 {
		t.Errorf("the scheme lacks %v", want)
	}
	for _, group := range []string{"apps", "batch", "rbac.authorization.k8s.io", "resource.k8s.io"} {
		if scheme.IsGroupRegistered(group) {
			t.Errorf("group %s is registered", group)
		}
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	_, err := New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5})
	if err == nil || !strings.Contains(err.Error(), "burst") {
		t.Fatalf("QPS without burst: got %v, want an error naming the burst", err)
	}
}

// TestNewSharesOneRateLimiter: every resource draws on one limiter, made
// from the config's QPS and Burst, and the config is left as it was.
func TestNewSharesOneRateLimiter(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 3}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	leases := c.Leases("a").GetClient().(*rest.RESTClient).GetRateLimiter()
	pods := c.Pods("a").GetClient().(*rest.RESTClient).GetRateLimiter()
	events := c.Events("a").GetClient().(*rest.RESTClient).GetRateLimiter()
	if leases == nil || leases != pods || leases != events || leases.QPS() != 7 {
		t.Fatalf("rate limiters %p %p %p (QPS %v), want one with QPS 7", leases, pods, events, leases.QPS())
	}
	if cfg.RateLimiter != nil || cfg.UserAgent != "" || cfg.GroupVersion != nil || cfg.NegotiatedSerializer != nil {
		t.Fatalf("New changed the config it was given: %+v", cfg)
	}
}

// TestLeasesCompareAndSwap: create, read, a conditional update, a stale
// update refused with a conflict, and a watch that sees the change.
func TestLeasesCompareAndSwap(t *testing.T) {
	ns := newNamespace(t)
	leases := newClient(t).Leases(ns)
	created, err := leases.Create(ctxFor(t), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	w, err := leases.Watch(ctxFor(t), metav1.ListOptions{ResourceVersion: created.ResourceVersion, FieldSelector: "metadata.name=l"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	got, err := leases.Get(ctxFor(t), "l", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "a" {
		t.Fatalf("Get: %v, %v", got, err)
	}
	got.Spec.HolderIdentity = ptr.To("b")
	updated, err := leases.Update(ctxFor(t), got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	got.Spec.HolderIdentity = ptr.To("c") // still at the old version
	if _, err := leases.Update(ctxFor(t), got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("Update from a stale version: got %v, want a conflict", err)
	}
	select {
	case ev := <-w.ResultChan():
		l, ok := ev.Object.(*coordinationv1.Lease)
		if ev.Type != watch.Modified || !ok || l.ResourceVersion != updated.ResourceVersion {
			t.Fatalf("watch event %s %T, want the update", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for the update")
	}
	list, err := leases.List(ctxFor(t), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || *list.Items[0].Spec.HolderIdentity != "b" {
		t.Fatalf("List: %v, %v", list, err)
	}
}

// TestPodsGetAndPatch: a strategic merge patch of a Pod's labels and of
// its status, each conditional on the Pod's UID.
func TestPodsGetAndPatch(t *testing.T) {
	ns := newNamespace(t)
	pod, err := env.Client.CoreV1().Pods(ns).Create(ctxFor(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := newClient(t).Pods(ns)
	got, err := pods.Get(ctxFor(t), "p", metav1.GetOptions{})
	if err != nil || got.UID != pod.UID || got.Spec.Containers[0].Image != "app" {
		t.Fatalf("Get: %v, %v", got, err)
	}
	label := `{"metadata":{"uid":"` + string(pod.UID) + `","labels":{"role":"leader"}}}`
	if got, err = pods.Patch(ctxFor(t), "p", types.StrategicMergePatchType, []byte(label), metav1.PatchOptions{}); err != nil || got.Labels["role"] != "leader" {
		t.Fatalf("Patch labels: %v, %v", got.Labels, err)
	}
	cond := `{"metadata":{"uid":"` + string(pod.UID) + `"},"status":{"conditions":[{"type":"x/leader","status":"True"}]}}`
	if got, err = pods.Patch(ctxFor(t), "p", types.StrategicMergePatchType, []byte(cond), metav1.PatchOptions{}, "status"); err != nil ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("Patch status: %v, %v", got.Status.Conditions, err)
	}
	other := `{"metadata":{"uid":"00000000-0000-0000-0000-000000000000","labels":{"role":"x"}}}`
	if _, err := pods.Patch(ctxFor(t), "p", types.StrategicMergePatchType, []byte(other), metav1.PatchOptions{}); err == nil {
		t.Fatal("a patch carrying another UID was applied")
	}
	if got, err = pods.Get(ctxFor(t), "p", metav1.GetOptions{}); err != nil || got.Labels["role"] != "leader" {
		t.Fatalf("after a patch carrying another UID: labels %v, %v", got.Labels, err)
	}
}

func TestEventsCreate(t *testing.T) {
	ns := newNamespace(t)
	now := metav1.NewMicroTime(time.Now())
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "p.1", Namespace: ns}, EventTime: now,
		ReportingController: "c", ReportingInstance: "c-1", Action: "A", Reason: "R", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "p"}, Note: "n"}
	if _, err := newClient(t).Events(ns).Create(ctxFor(t), ev, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := env.Client.EventsV1().Events(ns).Get(ctxFor(t), "p.1", metav1.GetOptions{})
	if err != nil || got.Action != "A" || got.Regarding.Name != "p" || got.Note != "n" {
		t.Fatalf("the Event as stored: %v, %v", got, err)
	}
}

func TestNewClientRejects(t *testing.T) {
	if _, err := NewClient(nil, Options{}); err == nil {
		t.Fatal("NewClient(nil) succeeded")
	}
	for _, o := range []Options{{Timeout: -1}, {QPS: -1}, {Burst: -1}} {
		if _, err := NewClient(&rest.Config{Host: "https://127.0.0.1:1"}, o); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("NewClient(%+v): got %v, want an error about a negative option", o, err)
		}
	}
}

func TestNewClientSettings(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1000, Burst: 2000, Timeout: time.Hour}
	for _, c := range []struct {
		o   Options
		qps float32
	}{
		{Options{}, DefaultQPS},
		{Options{QPS: 7, Burst: 3, UserAgent: "leader-sidecar/1.2.3"}, 7},
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
	client, err := NewClient(&rest.Config{Host: srv.URL}, Options{Timeout: 200 * time.Millisecond, UserAgent: "leader-sidecar/test"})
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
