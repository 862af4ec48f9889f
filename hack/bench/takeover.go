package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
)

// trial is one hand-off or fail-over.
type trial struct {
	Latency time.Duration // signal -> standby reports leadership
	Beyond  time.Duration // fail-over only: takeover - (last renewTime + lease duration)
	Steps   []step        // the instants between, where known (floor.go)
}

// group is the candidates of one election: a leader and its standbys,
// replaced as trials stop leaders.
type group struct {
	sys, backend, ns, name string
	prof                   profile
	leader                 *cand
	standbys               []*cand
	extra                  []string // sidecar: further flags of every candidate (spawn's extra)
}

// newPair starts a leader, waits for it to lead, and starts a standby.
func (b *bench) newPair(sys string, prof profile, backend, ns, name string) (*group, error) {
	g := &group{sys: sys, backend: backend, ns: ns, name: name, prof: prof}
	var err error
	if g.leader, err = b.spawn(sys, prof, backend, ns, name, true); err != nil {
		return nil, err
	}
	if err := g.leader.waitLeading(2*prof.Lease + 30*time.Second); err != nil {
		g.leader.stop()
		return nil, err
	}
	standby, err := b.spawn(sys, prof, backend, ns, name, true)
	if err != nil {
		g.leader.stop()
		return nil, err
	}
	g.standbys = []*cand{standby}
	return g, nil
}

func (g *group) stop() { stopAll(append([]*cand{g.leader}, g.standbys...)) }

// takeovers runs n hand-offs (sig SIGTERM) or fail-overs (SIGKILL) between
// two candidates of sys on a fresh election.
func (b *bench) takeovers(sys string, prof profile, backend string, sig syscall.Signal, n int) ([]trial, error) {
	base := fmt.Sprintf("%s-%s-%s", kindOf(sig), sys, prof.Name)
	var ns string
	var err error
	if backend == "postgres" {
		ns = b.freshName(base) // a name in the one records table, not a namespace
	} else if ns, err = b.namespace(base); err != nil {
		return nil, err
	}
	g, err := b.newPair(sys, prof, backend, ns, "bench")
	if err != nil {
		return nil, err
	}
	defer g.stop()
	return b.trials(g, sig, n)
}

func kindOf(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "failover"
	}
	return "handoff"
}

// trials runs n takeovers in g.
func (b *bench) trials(g *group, sig syscall.Signal, n int) ([]trial, error) {
	var out []trial
	for i := 0; i < n; i++ {
		t, err := b.takeover(g, sig)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		b.logf("  %s %s %s/%s trial %d: %v (beyond lease %v) %s", kindOf(sig), g.sys, g.prof.Name, g.backend, i+1,
			t.Latency.Round(time.Microsecond), t.Beyond.Round(time.Microsecond), stepsString(t.Steps))
	}
	return out, nil
}

// takeover signals g's leader once its standbys have seen it, at a random
// phase of their polls and the leader's renewals, measures the first
// standby's takeover, and starts a new standby in the old leader's place.
//
// Before a crash, the standbys have also run for a renew interval (a third
// of the lease), so each has seen the leader renew: a standby counts the
// lease from the moment it first saw the record's version, and one
// started after the leader's last write could only count it from its own
// start, which says how late the bench started it, not how soon it takes
// over.
func (b *bench) takeover(g *group, sig syscall.Signal) (trial, error) {
	pause := randomPause(g.prof)
	for _, s := range g.standbys {
		if err := settled(s, g.prof); err != nil {
			return trial{}, err
		}
	}
	if sig == syscall.SIGKILL {
		time.Sleep(g.prof.Lease / 3)
		pause = randomPause(g.prof)
	}
	<-pause
	for _, s := range g.standbys {
		if s.isLeading() {
			return trial{}, fmt.Errorf("%s: a standby leads before the leader stopped", s.sys)
		}
	}
	t0 := time.Now()
	_ = g.leader.cmd.Process.Signal(sig)
	var renew time.Time
	if sig == syscall.SIGKILL && g.backend != "sqlite" {
		// A renewal the leader sent just before the kill may still land:
		// read the record once it has, and before a standby can take over
		// (the last renewal + the lease, at the earliest two thirds of a
		// lease after the kill).
		time.Sleep(g.prof.Lease / 3)
		if g.backend == "postgres" {
			var err error
			if renew, err = b.pgRenewTime(pgElection(g.ns, g.name)); err != nil {
				return trial{}, err
			}
		} else if l, err := b.kube.Client.CoordinationV1().Leases(g.ns).Get(context.Background(), g.name, metav1.GetOptions{}); err == nil && l.Spec.RenewTime != nil {
			renew = l.Spec.RenewTime.Time
		}
	}
	next, err := firstToLead(g.standbys, 2*g.prof.Lease+10*time.Second)
	if err != nil {
		return trial{}, err
	}
	t := trial{Latency: next.leadTime().Sub(t0)}
	if !renew.IsZero() {
		t.Beyond = next.leadTime().Sub(renew.Add(g.prof.Lease))
	}
	old := g.leader
	old.stop() // its logs are complete once it has exited
	if base, reported := t0, t.Latency; g.sys == sysSidecar {
		if sig == syscall.SIGKILL {
			base, reported = renew.Add(g.prof.Lease), t.Beyond
		}
		t.Steps = sidecarSteps(old, next, base, reported)
	}
	g.leader = next
	g.standbys = slices.DeleteFunc(g.standbys, func(c *cand) bool { return c == next })
	fresh, err := b.spawn(g.sys, g.prof, g.backend, g.ns, g.name, true, g.extra...)
	if err != nil {
		return t, err
	}
	g.standbys = append(g.standbys, fresh)
	return t, nil
}

// pgRenewTime is the renew time of the PostgreSQL record of election in
// the sidecar's default table, as its last writer stamped it (to the
// microsecond, as stored).
func (b *bench) pgRenewTime(election string) (time.Time, error) {
	var us sql.NullInt64
	err := b.pgDB.QueryRow(`SELECT (extract(epoch FROM renew_time) * 1000000)::bigint FROM `+postgres.DefaultTable+
		` WHERE name = $1`, election).Scan(&us)
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("reading the renew time of %s: %w", election, err)
	case !us.Valid:
		return time.Time{}, fmt.Errorf("the record of %s has no renew time", election)
	}
	return time.UnixMicro(us.Int64), nil
}

// randomPause is the wait before a trial: 0.2 to 2.2 retry periods.
func randomPause(prof profile) <-chan time.Time {
	return time.After(200*time.Millisecond + time.Duration(rand.Int64N(int64(prof.Retry*22/10))))
}

// firstToLead waits until one of standbys leads and returns it.
func firstToLead(standbys []*cand, within time.Duration) (*cand, error) {
	first := make(chan *cand, len(standbys))
	stop := make(chan struct{})
	defer close(stop)
	for _, s := range standbys {
		go func() {
			select {
			case <-s.leading:
				first <- s
			case <-stop:
			}
		}()
	}
	select {
	case c := <-first:
		return c, nil
	case <-time.After(within):
		return nil, fmt.Errorf("no standby led within %v:\n%s", within, standbys[0].tail())
	}
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

// holderNow asks the sidecar's GET /leader which holder it has seen.
func (c *cand) holderNow() (holder, self string) {
	st, err := c.sidecar.Leader()
	if err != nil {
		return "", ""
	}
	return st.Holder, st.Identity
}
