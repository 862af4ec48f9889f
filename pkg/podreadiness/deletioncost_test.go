package podreadiness

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakePods is one Pod held in memory, patched as the API server patches
// the metadata and status this package writes, with the uid and
// resourceVersion preconditions. forbid refuses every patch (and, with
// forbidGet, every read) as a Role without them would.
type fakePods struct {
	mu                sync.Mutex
	pod               *corev1.Pod
	gets, patches     int
	forbid, forbidGet bool
}

func newFakePods(annotations map[string]string, manager string) *fakePods {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-0", Namespace: "ns", UID: "uid-0", ResourceVersion: "1",
		Annotations: annotations}}
	if manager != "" {
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: manager, FieldsV1: &metav1.FieldsV1{
			Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + DeletionCostAnnotation + `":{}}}}`)}}}
	}
	return &fakePods{pod: pod}
}

var podsResource = schema.GroupResource{Resource: "pods"}

func (f *fakePods) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.forbidGet {
		return nil, apierrors.NewForbidden(podsResource, name, nil)
	}
	return f.pod.DeepCopy(), nil
}

func (f *fakePods) Patch(_ context.Context, name string, _ types.PatchType, data []byte, _ metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.patches++
	if f.forbid {
		return nil, apierrors.NewForbidden(podsResource, name, nil)
	}
	var body struct {
		Metadata struct {
			UID             string             `json:"uid"`
			ResourceVersion string             `json:"resourceVersion"`
			Labels          map[string]string  `json:"labels"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Status struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, err
	}
	m := body.Metadata
	if m.UID != string(f.pod.UID) || (m.ResourceVersion != "" && m.ResourceVersion != f.pod.ResourceVersion) {
		return nil, apierrors.NewConflict(podsResource, name, nil)
	}
	f.edit(func(p *corev1.Pod) {
		for k, v := range m.Labels {
			p.Labels = set(p.Labels, k, &v)
		}
		for k, v := range m.Annotations {
			p.Annotations = set(p.Annotations, k, v)
		}
		p.Status.Conditions = append(p.Status.Conditions, body.Status.Conditions...)
	})
	return f.pod.DeepCopy(), nil
}

// edit changes the Pod as a write would, with a new resourceVersion.
// The caller holds mu.
func (f *fakePods) edit(change func(*corev1.Pod)) {
	change(f.pod)
	rv := len(f.pod.ResourceVersion) + 1
	f.pod.ResourceVersion = strings.Repeat("1", rv)
}

func set(m map[string]string, k string, v *string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	if v == nil {
		delete(m, k)
	} else {
		m[k] = *v
	}
	return m
}

func (f *fakePods) cost() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.pod.Annotations[DeletionCostAnnotation]
	return v, ok
}

func (f *fakePods) patchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.patches
}

// lockedBuffer is a log sink the Publisher's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

const resync = 30 * time.Second

// startFake runs a Publisher of the deletion cost (and mode) on f, inside
// the test's bubble; it stops when the test ends.
func startFake(t *testing.T, f podAPI, mode Mode) (*Publisher, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	p, err := New(Config{Client: client, Namespace: "ns", Name: "app-0", UID: "uid-0", Mode: mode, DeletionCost: true,
		ResyncPeriod: resync, LabelKey: label, ConditionType: condition, Identity: "me_1",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p.pods = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	synctest.Wait()
	return p, logs
}

// settle lets the Publisher's retries and resyncs run for d of the
// bubble's time.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestDeletionCostFollowsTheTermsOnePatchEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(nil, "")
		p, _ := startFake(t, f, ModeNone)
		if n := f.patchCount(); n != 0 {
			t.Fatalf("a standby's Pod without a cost was patched %d times", n)
		}
		p.LeadershipChanged(true, 1)
		synctest.Wait()
		if v, _ := f.cost(); v != LeaderDeletionCost || f.patchCount() != 1 {
			t.Fatalf("after the term started: cost %q after %d patches, want %q after 1", v, f.patchCount(), LeaderDeletionCost)
		}
		p.LeadershipChanged(true, 2) // a new term without a flip: nothing to write
		settle(3 * resync)
		if f.patchCount() != 1 {
			t.Fatalf("the Pod was patched %d times while its leader led on, want 1", f.patchCount())
		}
		p.LeadershipChanged(false, 2)
		synctest.Wait()
		if v, ok := f.cost(); ok || f.patchCount() != 2 {
			t.Fatalf("after the term ended: cost %q (present %v) after %d patches, want none after 2", v, ok, f.patchCount())
		}
	})
}

// A standby's Pod is read at start and at every change, never on the
// resync: idle standbys cost the API server nothing.
func TestStandbysPodIsNotReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(nil, "")
		startFake(t, f, ModeLabel)
		settle(10 * resync)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gets != 1 {
			t.Fatalf("a standby's Pod was read %d times in ten resync periods, want once (at start)", f.gets)
		}
	})
}

func TestDeletionCostLeftByAnEarlierContainerIsCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(map[string]string{DeletionCostAnnotation: LeaderDeletionCost}, FieldManager)
		startFake(t, f, ModeNone)
		if v, ok := f.cost(); ok {
			t.Fatalf("a standby's Pod keeps the leader's cost %q", v)
		}
	})
}

func TestDeletionCostRemovedBySomeoneElseIsRepairedAndSaidOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(nil, "")
		p, logs := startFake(t, f, ModeNone)
		p.LeadershipChanged(true, 1)
		synctest.Wait()
		for range 2 {
			f.mu.Lock()
			f.edit(func(p *corev1.Pod) { delete(p.Annotations, DeletionCostAnnotation) })
			f.mu.Unlock()
			settle(resync)
			if v, _ := f.cost(); v != LeaderDeletionCost {
				t.Fatalf("a resync later the cost is %q, want %q back", v, LeaderDeletionCost)
			}
		}
		if n := logs.count("repaired"); n != 1 {
			t.Fatalf("two repairs logged %d times, want once:\n%s", n, logs.b.String())
		}
	})
}

func TestDeletionCostOfAnotherWriterIsLeftAloneAndReportedOnce(t *testing.T) {
	for _, leading := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := newFakePods(map[string]string{DeletionCostAnnotation: "-3"}, "karpenter")
			p, logs := startFake(t, f, ModeNone)
			p.LeadershipChanged(leading, 1)
			settle(3 * resync)
			if v, _ := f.cost(); v != "-3" || f.patchCount() != 0 {
				t.Fatalf("leading %v: cost %q after %d patches; want Karpenter's -3 untouched", leading, v, f.patchCount())
			}
			if n := logs.count("set by someone else"); n != 1 || logs.count("manager=karpenter") != 1 {
				t.Fatalf("leading %v: the other writer was reported %d times, want once naming it:\n%s", leading, n, logs.b.String())
			}
		})
	}
}

// A cost written by someone else between the Publisher's read and its
// patch is not overwritten: the patch carries the version read.
func TestDeletionCostWrittenDuringThePatchIsNotOverwritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(nil, "")
		p, _ := startFake(t, &racingPods{fakePods: f}, ModeNone)
		p.LeadershipChanged(true, 1)
		settle(time.Minute)
		if v, _ := f.cost(); v != "7" {
			t.Fatalf("the cost is %q, want the other writer's 7", v)
		}
	})
}

// racingPods writes a cost of 7 right after the second read (the first
// after the term starts).
type racingPods struct {
	*fakePods
	reads int
}

func (r *racingPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	pod, err := r.fakePods.Get(ctx, name, opts)
	if r.reads++; r.reads == 2 {
		r.mu.Lock()
		r.edit(func(p *corev1.Pod) { p.Annotations = set(p.Annotations, DeletionCostAnnotation, new("7")) })
		r.mu.Unlock()
	}
	return pod, err
}

func TestDeletionCostRefusedByRBACIsQuiet(t *testing.T) {
	for name, f := range map[string]*fakePods{
		"no patch": {pod: newFakePods(nil, "").pod, forbid: true},
		"no get":   {pod: newFakePods(nil, "").pod, forbid: true, forbidGet: true},
	} {
		synctest.Test(t, func(t *testing.T) {
			p, logs := startFake(t, f, ModeNone)
			p.LeadershipChanged(true, 1)
			settle(3 * resync)
			p.LeadershipChanged(false, 1)
			settle(3 * resync)
			if n := f.patchCount(); (name == "no patch" && n != 1) || (name == "no get" && n != 0) {
				t.Fatalf("%s: %d patches tried; the first refusal should end them", name, n)
			}
			if n := logs.count("RBAC does not let"); n != 1 {
				t.Fatalf("%s: the refusal was logged %d times, want once:\n%s", name, n, logs.b.String())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := p.Drain(ctx); err != nil {
				t.Fatalf("%s: Drain: %v", name, err)
			}
		})
	}
}

// In label mode a refused cost leaves the label working: the label alone
// is retried.
func TestDeletionCostRefusedLeavesTheLabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePods(nil, "")
		p, logs := startFake(t, &forbidCostPods{fakePods: f}, ModeLabel)
		p.LeadershipChanged(true, 1)
		settle(time.Minute)
		f.mu.Lock()
		role := f.pod.Labels[label]
		f.mu.Unlock()
		if _, ok := f.cost(); ok || role != RoleLeader {
			t.Fatalf("role %q, cost present %v; want the leader's label and no cost", role, ok)
		}
		if n := logs.count("RBAC does not let"); n != 1 {
			t.Fatalf("the refusal was logged %d times, want once", n)
		}
	})
}

// forbidCostPods refuses every patch that touches the deletion cost.
type forbidCostPods struct{ *fakePods }

func (f *forbidCostPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Pod, error) {
	if bytes.Contains(data, []byte(DeletionCostAnnotation)) {
		return nil, apierrors.NewForbidden(podsResource, name, nil)
	}
	return f.fakePods.Patch(ctx, name, pt, data, opts, sub...)
}

// On a real API server: the cost is set and removed by the patches the
// Publisher sends (null removes an annotation), under its own field
// manager; another manager's cost is named in the warning and kept.
func TestDeletionCostOnAnAPIServer(t *testing.T) {
	pod := newPod(t, "app-0")
	logs := &lockedBuffer{}
	p, err := New(Config{Client: client, Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Mode: ModeNone,
		DeletionCost: true, Identity: "me_1", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	hasCost := func(want string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			v, ok := p.Annotations[DeletionCostAnnotation]
			return ok == (want != "") && v == want
		}
	}
	p.LeadershipChanged(true, 1)
	got := eventually(t, pod, "the leader's deletion cost", hasCost(LeaderDeletionCost))
	if m := costManager(got); m != FieldManager {
		t.Fatalf("the cost's field manager is %q, want %q", m, FieldManager)
	}
	p.LeadershipChanged(false, 1)
	eventually(t, pod, "no deletion cost", hasCost(""))

	// Another manager's cost, as Karpenter's would be.
	patch := []byte(`{"metadata":{"annotations":{"` + DeletionCostAnnotation + `":"-5"}}}`)
	if _, err := env.Client.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: "karpenter"}); err != nil {
		t.Fatal(err)
	}
	p.LeadershipChanged(true, 2)
	drain, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if err := p.Drain(drain); err != nil {
		t.Fatal(err)
	}
	eventually(t, pod, "Karpenter's cost kept", hasCost("-5"))
	if logs.count("set by someone else") != 1 || logs.count("manager=karpenter") != 1 {
		t.Fatalf("the other manager was not reported once by name:\n%s", logs.b.String())
	}
}
