package e2e

import (
	"sync"
	"sync/atomic"
	"time"
)

// member is a sidecar a sweep asks, by name; its epoch orders its terms.
type member struct {
	name  string
	s     *sidecar
	epoch int
}

// sweep asks every member of set() GET /leader every interval, all at
// once, until stop is closed, and logs each leader:true answer with its
// sweep. A member still answering an earlier sweep (a frozen process) is
// skipped, and so is one that has exited; a live member that fails to
// answer is kept in errs (see failed).
func (l *claimLog) sweep(wg *sync.WaitGroup, stop <-chan struct{}, every time.Duration, set func() []member) {
	busy := map[*sidecar]*atomic.Bool{}
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			l.mu.Lock()
			n := len(l.sweeps)
			l.sweeps = append(l.sweeps, time.Now())
			l.mu.Unlock()
			for _, m := range set() {
				if busy[m.s] == nil {
					busy[m.s] = &atomic.Bool{}
				}
				b := busy[m.s]
				if !m.s.alive() || !b.CompareAndSwap(false, true) {
					continue
				}
				wg.Go(func() {
					defer b.Store(false)
					l.ask(m, n)
				})
			}
		}
	})
}

// ask sends one GET /leader for sweep n and logs the answer.
func (l *claimLog) ask(m member, n int) {
	sent := time.Now()
	st, err := m.s.leader()
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		if m.s.alive() {
			if l.errs == nil {
				l.errs = map[string]error{}
			}
			l.errs[m.name] = err
		}
		return
	case st.Leader:
		l.claims = append(l.claims, claim{m.name, term{m.epoch, *st.Token}, n, sent, at})
	}
	l.asked++
}

// failed is the last error of each named member that was alive when it
// did not answer.
func (l *claimLog) failed(names ...string) map[string]error {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]error{}
	for _, n := range names {
		if err, ok := l.errs[n]; ok {
			out[n] = err
		}
	}
	return out
}

// leaderless is the longest run of sweeps begun in [from, to) in which
// nobody answered leader:true, as the time from the first to the last of
// them plus one interval (0: every sweep had a leader).
func (l *claimLog) leaderless(from, to time.Time, every time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	led := map[int]bool{}
	for _, c := range l.claims {
		led[c.sweep] = true
	}
	var longest time.Duration
	var runStart time.Time
	for i, at := range l.sweeps {
		switch {
		case at.Before(from) || !at.Before(to):
			runStart = time.Time{}
		case led[i]:
			runStart = time.Time{}
		case runStart.IsZero():
			runStart = at
			longest = max(longest, every)
		default:
			longest = max(longest, at.Sub(runStart)+every)
		}
	}
	return longest
}

// firstClaim is when the first claim of tm arrived (zero: never).
func (l *claimLog) firstClaim(tm term) (who string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.claims {
		if c.term == tm && (at.IsZero() || c.answer.Before(at)) {
			who, at = c.who, c.answer
		}
	}
	return who, at
}

// lastSent is when the last claim of tm was sent (zero: never).
func (l *claimLog) lastSent(tm term) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, c := range l.claims {
		if c.term == tm && c.sent.After(last) {
			last = c.sent
		}
	}
	return last
}

// members is the set a sweep asks, growing as sidecars start.
type members struct {
	mu   sync.Mutex
	list []member
}

func (ms *members) add(name string, s *sidecar, epoch int) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.list = append(ms.list, member{name, s, epoch})
}

func (ms *members) all() []member {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]member(nil), ms.list...)
}

// sweepUntilHalted starts l.sweep and returns halt, which stops it and
// waits for it; halt may be called more than once.
func (l *claimLog) sweepUntilHalted(every time.Duration, members func() []member) (halt func()) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	l.sweep(&wg, stop, every, members)
	return func() { once.Do(func() { close(stop) }); wg.Wait() }
}
