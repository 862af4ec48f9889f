package apiserver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The chaos run's fleet (see TestChaos): its sidecars, each behind a TCP
// proxy of its own, with a sampler that keeps every /leader answer and a
// writer that writes through a shared guard as the application would; and
// the windows of answers each fault is judged on.

// chaosMember is one sidecar of the chaos run and its own proxy.
type chaosMember struct {
	i      int
	pod    string
	s      *sidecartest.Sidecar
	px     *sidecartest.TCPProxy
	killed atomic.Bool // killed on purpose: its errors are expected
	paused atomic.Bool // SIGSTOPped: its requests hang
}

// chaosWrite is one write the guard accepted.
type chaosWrite struct {
	who   int
	token int64
	at    time.Time
}

// chaos is the running fleet, its samplers and writers.
type chaos struct {
	t        *testing.T
	k        *sidecartest.KubeEnv
	ns, name string
	upstream string // lease: the API server's host:port
	db       string // sqlite: the election's file
	seed     uint64
	stop     chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	members  []*chaosMember
	answers  []sidecartest.Answer // every /leader answer, per member in sampling order
	failed   []error              // a live, running sidecar that did not answer
	samples  int
	guard    fence.MemoryGuard
	accepted []chaosWrite // in the order the guard accepted them
	rejected int
	writeErr []error // a write refused for another reason than a stale token
}

// add starts a sidecar behind a proxy of its own, its sampler and its
// writer.
func (c *chaos) add() *chaosMember {
	c.t.Helper()
	c.mu.Lock()
	i := len(c.members)
	c.mu.Unlock()
	m := &chaosMember{i: i, pod: fmt.Sprintf("app-%d", i)}
	if c.db != "" {
		m.s = sidecartest.Start(c.t, c.db)
	} else {
		m.px = sidecartest.NewTCPProxy(c.t, c.upstream)
		m.s = sidecartest.LeaseSidecar(c.t, c.k.KubeconfigVia(c.t, m.px.Addr()), c.ns, c.name, m.pod)
	}
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	c.wg.Go(func() { c.sample(m) })
	rng := rand.New(rand.NewPCG(c.seed, uint64(i)))
	c.wg.Go(func() { c.write(m, rng) })
	return m
}

func (c *chaos) stopped(d time.Duration) bool {
	select {
	case <-c.stop:
		return true
	case <-time.After(d):
		return false
	}
}

// sample asks m's sidecar GET /leader every 5ms and keeps every answer.
func (c *chaos) sample(m *chaosMember) {
	for !c.stopped(5 * time.Millisecond) {
		if m.killed.Load() && !m.s.Alive() {
			return
		}
		sent := time.Now()
		st, err := m.s.Leader()
		c.mu.Lock()
		c.samples++
		if err == nil {
			c.answers = append(c.answers, sidecartest.Answer{Who: m.i, State: st, Sent: sent, At: time.Now()})
		} else if m.s.Alive() && !m.killed.Load() && !m.paused.Load() {
			c.failed = append(c.failed, fmt.Errorf("%s at %v: %w", m.pod, sent.Format(time.StampMilli), err))
		}
		c.mu.Unlock()
	}
}

// write is the application next to m's sidecar: whenever the sidecar says
// it leads with token T, it works a little (0-40ms, holding T) and then
// writes the resource "chaos" through the shared guard with T.
func (c *chaos) write(m *chaosMember, rng *rand.Rand) {
	for !c.stopped(15 * time.Millisecond) {
		if m.killed.Load() && !m.s.Alive() {
			return
		}
		st, err := m.s.Leader()
		if err != nil || !st.Leader || st.Token == nil {
			continue
		}
		tok := *st.Token
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		err = c.guard.Do("chaos", fence.TermID{Token: tok, Holder: st.Identity}, func() error {
			// Under the guard's lock: the order of this slice is the order
			// in which the guard accepted the writes.
			c.mu.Lock()
			c.accepted = append(c.accepted, chaosWrite{m.i, tok, time.Now()})
			c.mu.Unlock()
			return nil
		})
		c.mu.Lock()
		switch {
		case errors.Is(err, fence.ErrStaleToken):
			c.rejected++
		case err != nil:
			c.writeErr = append(c.writeErr, err)
		}
		c.mu.Unlock()
	}
}

func (c *chaos) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// live is every sidecar that was neither killed nor is paused.
func (c *chaos) live() []*sidecartest.Sidecar {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sidecartest.Sidecar
	for _, m := range c.members {
		if !m.killed.Load() && !m.paused.Load() {
			out = append(out, m.s)
		}
	}
	return out
}

func (c *chaos) member(s *sidecartest.Sidecar) *chaosMember {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.s == s {
			return m
		}
	}
	c.t.Fatalf("no member for sidecar %d", s.Pid())
	return nil
}

// window is every answer sent in [from, to).
func (c *chaos) window(from, to time.Time) []sidecartest.Answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []sidecartest.Answer
	for _, a := range c.answers {
		if !a.Sent.Before(from) && a.Sent.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// checkWindow runs the recorder's overlap check (sidecartest.CheckAnswers)
// on the answers sent in [from, to): no token below floor, no token claimed
// by two sidecars, and no older term claimed more than overlap after a
// newer term's first claim arrived. It returns the claims and the longest
// overlap.
func (c *chaos) checkWindow(from, to time.Time, floor int64, overlap time.Duration) ([]sidecartest.Answer, time.Duration) {
	c.t.Helper()
	c.mu.Lock()
	failed := append([]error(nil), c.failed...)
	c.mu.Unlock()
	claims, _, longest := sidecartest.CheckAnswers(c.t, c.window(from, to), failed, floor, overlap)
	return claims, longest
}

// lastClaimBy is when the last claim of tok by member who (among answers) was sent, after
// from; zero if none.
func lastClaimBy(claims []sidecartest.Answer, who int, tok int64, from time.Time) time.Time {
	var last time.Time
	for _, c := range claims {
		if c.State.Leader && c.State.Token != nil && c.Who == who && *c.State.Token == tok && c.Sent.After(from) && c.Sent.After(last) {
			last = c.Sent
		}
	}
	return last
}
