package apiserver

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// clientGoCandidate is a candidate built on client-go's leaderelection, as
// kube-controller-manager runs it, with the test timings.
type clientGoCandidate struct {
	identity string
	leading  atomic.Bool
	token    atomic.Int64 // leaseTransitions when it started leading
	cancel   context.CancelFunc
	done     chan struct{}
}

func startClientGo(t *testing.T, k *sidecartest.KubeEnv, ns, name, identity string) *clientGoCandidate {
	t.Helper()
	c := &clientGoCandidate{identity: identity, done: make(chan struct{})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     k.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   sidecartest.LeaseDuration,
		RenewDeadline:   sidecartest.RenewDeadline,
		RetryPeriod:     sidecartest.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				l := k.Lease(t, ns, name)
				c.token.Store(int64(*l.Spec.LeaseTransitions))
				c.leading.Store(true)
				<-ctx.Done()
				c.leading.Store(false)
			},
			OnStoppedLeading: func() { c.leading.Store(false) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		le.Run(ctx)
	}()
	t.Cleanup(c.stop)
	return c
}

// stop stops claiming first, then cancels, so the release client-go writes
// on cancel can never overlap a claim.
func (c *clientGoCandidate) stop() {
	c.leading.Store(false)
	c.cancel()
	<-c.done
}

func TestLeaseInteropWithClientGo(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "shared"
	kc := k.Kubeconfig(t, "")

	cg1 := startClientGo(t, k, ns, name, "client-go-1")
	sidecartest.WaitTrue(t, "client-go-1 leads", 15*time.Second, cg1.leading.Load)
	sidecars := []*sidecartest.Sidecar{sidecartest.LeaseSidecar(t, kc, ns, name, "app-0"), sidecartest.LeaseSidecar(t, kc, ns, name, "app-1")}

	var log sidecartest.ClaimLog
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sidecars {
		// A frozen sidecar times out: keep sampling.
		log.Sample(&wg, stop, s, func(error) bool { return true })
	}
	sampleClientGo(&log, &wg, stop, cg1)
	time.Sleep(time.Second)
	if ls, _ := sidecartest.Leaders(t, sidecars); len(ls) != 0 {
		t.Fatal("a sidecar leads while the client-go candidate holds a live Lease")
	}

	// client-go -> sidecar: the client-go candidate releases on cancel.
	released := time.Now()
	cg1.stop()
	leader, token := sidecartest.AwaitLeader(t, sidecars, sidecartest.LeaseDuration)
	if token != cg1.token.Load()+1 {
		t.Fatalf("sidecar took over with token %d after client-go's %d", token, cg1.token.Load())
	}
	// client-go's release has the release shape, so it is taken at once,
	// not waited out like a Lease emptied by hand.
	if took := time.Since(released); took > time.Second {
		t.Fatalf("sidecar took over %v after client-go released, want well under the %v lease", took, sidecartest.LeaseDuration)
	} else {
		t.Logf("client-go -> sidecar hand-off on release: %v", took.Round(time.Millisecond))
	}

	log.AwaitSampled(t, token)

	// sidecar -> client-go: freeze the other sidecar, release the leader.
	cg2 := startClientGo(t, k, ns, name, "client-go-2")
	sampleClientGo(&log, &wg, stop, cg2)
	other := sidecartest.Without(sidecars, leader)[0]
	other.Signal(syscall.SIGSTOP)
	resp, err := sidecartest.Client.Post("http://"+leader.Addr()+"/leader/release", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /leader/release: %v %v", resp, err)
	}
	resp.Body.Close()
	sidecartest.WaitTrue(t, "client-go-2 leads", 2*sidecartest.LeaseDuration, cg2.leading.Load)
	if cg2.token.Load() != token+1 {
		t.Fatalf("client-go took over with token %d after the sidecar's %d", cg2.token.Load(), token)
	}
	other.Signal(syscall.SIGCONT)
	time.Sleep(time.Second)

	// And back to a sidecar.
	cg2.stop()
	_, last := sidecartest.AwaitLeader(t, sidecars, 2*sidecartest.LeaseDuration)
	log.AwaitSampled(t, last)
	time.Sleep(200 * time.Millisecond) // and a late claim of the term before
	close(stop)
	wg.Wait()

	terms := log.Check(t)
	if last != cg2.token.Load()+1 || len(terms) != 4 {
		t.Fatalf("terms sampled %v, last token %d: want four terms, each one above the last", terms, last)
	}
	t.Logf("claims sampled per term: %v", terms)
}
