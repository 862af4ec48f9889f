package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spawn starts a candidate of sys on the Lease ns/name (or SQLite file)
// behind its own counting proxy.
func (b *bench) spawn(sys string, prof profile, backend, ns, name string, follow bool) (*cand, error) {
	spec := candSpec{sys: sys, prof: prof, backend: backend, namespace: ns, lease: name, follow: follow,
		identity: fmt.Sprintf("%s-%d", strings.ReplaceAll(sys, "-", ""), b.seq.Add(1))}
	var p *countingProxy
	if backend == "sqlite" {
		spec.sqlitePath = filepath.Join(b.tmp, ns+".db")
	} else {
		var err error
		if p, err = newProxy(b.kube.Config); err != nil {
			return nil, err
		}
		if spec.kubeconfig, err = p.kubeconfig(b.tmp); err != nil {
			return nil, err
		}
	}
	c, err := b.startCand(spec)
	if err != nil {
		return nil, err
	}
	c.proxy = p
	return c, nil
}

func (b *bench) namespace(base string) (string, error) {
	if b.kube == nil {
		return b.sqliteName(base), nil
	}
	return b.kube.Namespace(context.Background(), base)
}

// settled waits until a new standby has seen the current leader: a sidecar
// reports it as holder; a client-go candidate reads the Lease at once when
// it starts, so a short wait after "started" is enough.
func settled(standby *cand, prof profile) error {
	if err := standby.waitReady(30 * time.Second); err != nil {
		return err
	}
	if standby.sys == sysClientGo {
		time.Sleep(300 * time.Millisecond)
		return nil
	}
	deadline := time.Now().Add(2*prof.Lease + 5*time.Second)
	for time.Now().Before(deadline) {
		if h, self := standby.holderNow(); h != "" && h != self {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("standby never saw the leader:\n%s", standby.tail())
}

// trial is one hand-off or fail-over.
type trial struct {
	Latency time.Duration // signal -> standby reports leadership
	Beyond  time.Duration // fail-over only: takeover - (last renewTime + lease duration)
}

// takeovers runs n hand-offs (sig SIGTERM) or fail-overs (SIGKILL) between
// two candidates of sys, replacing the stopped one each time.
func (b *bench) takeovers(sys string, prof profile, backend string, sig syscall.Signal, n int) ([]trial, error) {
	kind := "handoff"
	if sig == syscall.SIGKILL {
		kind = "failover"
	}
	ns, err := b.namespace(fmt.Sprintf("%s-%s-%s", kind, sys, prof.Name))
	if err != nil {
		return nil, err
	}
	name := "bench"
	leader, err := b.spawn(sys, prof, backend, ns, name, true)
	if err != nil {
		return nil, err
	}
	if err := leader.waitLeading(2*prof.Lease + 30*time.Second); err != nil {
		return nil, err
	}
	standby, err := b.spawn(sys, prof, backend, ns, name, true)
	if err != nil {
		return nil, err
	}
	defer func() { leader.stop(); standby.stop() }()
	var out []trial
	for i := 0; i < n; i++ {
		// A random phase against the standby's polls and the leader's renewals.
		pause := time.After(200*time.Millisecond + time.Duration(rand.Int64N(int64(prof.Retry*22/10))))
		if err := settled(standby, prof); err != nil {
			return out, err
		}
		<-pause
		if standby.isLeading() {
			return out, fmt.Errorf("%s: standby leads before the leader stopped", sys)
		}
		t0 := time.Now()
		_ = leader.cmd.Process.Signal(sig)
		var renew time.Time
		if sig == syscall.SIGKILL && backend != "sqlite" {
			if l, err := b.kube.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
				renew = l.Spec.RenewTime.Time
			}
		}
		if err := standby.waitLeading(2*prof.Lease + 10*time.Second); err != nil {
			return out, err
		}
		t := trial{Latency: standby.leadTime().Sub(t0)}
		if !renew.IsZero() {
			t.Beyond = standby.leadTime().Sub(renew.Add(prof.Lease))
		}
		out = append(out, t)
		b.logf("  %s %s %s/%s trial %d: %v (beyond lease %v)", kind, sys, prof.Name, backend, i+1, t.Latency.Round(time.Microsecond), t.Beyond.Round(time.Microsecond))
		leader.stop()
		leader = standby
		if standby, err = b.spawn(sys, prof, backend, ns, name, true); err != nil {
			return out, err
		}
	}
	return out, nil
}

// startup measures, for a sidecar on a fresh Lease, the time from process
// start to the first answer on /leader, and for both systems the time to
// lead on a free Lease.
func (b *bench) startup(sys string, prof profile) (firstAnswer, lead time.Duration, err error) {
	ns, err := b.namespace("startup-" + sys)
	if err != nil {
		return 0, 0, err
	}
	spec := candSpec{sys: sys, prof: prof, backend: "lease", namespace: ns, lease: "bench", follow: true, identity: "startup"}
	p, err := newProxy(b.kube.Config)
	if err != nil {
		return 0, 0, err
	}
	if spec.kubeconfig, err = p.kubeconfig(b.tmp); err != nil {
		return 0, 0, err
	}
	if sys == sysSidecar {
		if spec.httpAddr, err = freePort(); err != nil {
			return 0, 0, err
		}
	}
	c, err := b.startCand(spec)
	if err != nil {
		return 0, 0, err
	}
	c.proxy = p
	defer c.stop()
	if sys == sysSidecar {
		client := &http.Client{Timeout: time.Second}
		for deadline := time.Now().Add(30 * time.Second); ; {
			if resp, err := client.Get("http://" + spec.httpAddr + "/leader"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					firstAnswer = time.Since(c.started)
					break
				}
			}
			if time.Now().After(deadline) {
				return 0, 0, fmt.Errorf("sidecar never answered /leader:\n%s", c.tail())
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := c.waitLeading(30 * time.Second); err != nil {
		return 0, 0, err
	}
	return firstAnswer, c.leadTime().Sub(c.started), nil
}

// holderNow asks the sidecar's GET /leader which holder it has seen.
func (c *cand) holderNow() (holder, self string) {
	st, err := c.sidecar.Leader()
	if err != nil {
		return "", ""
	}
	return st.Holder, st.Identity
}
