package sidecartest

import (
	"sync"
	"sync/atomic"
	"time"
)

// SweepEvery is how often the overlap tests ask every sidecar GET /leader.
const SweepEvery = 10 * time.Millisecond

// Member is a sidecar a sweep asks, by name; its epoch orders its terms.
type Member struct {
	Name    string
	Sidecar *Sidecar
	Epoch   int
}

// Members is the set a sweep asks, growing as sidecars start. Its zero
// value is ready to use.
type Members struct {
	mu   sync.Mutex
	list []Member
}

// Add makes s a member named name whose terms are of epoch.
func (ms *Members) Add(name string, s *Sidecar, epoch int) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.list = append(ms.list, Member{name, s, epoch})
}

// All is every member so far.
func (ms *Members) All() []Member {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]Member(nil), ms.list...)
}

// SweepUntilHalted asks every member of set() GET /leader every interval,
// all at once, and logs each leader:true answer with its sweep, until halt
// is called; halt waits for the sweeps to end and may be called more than
// once. A member still answering an earlier sweep (a frozen process) is
// skipped, and so is one that has exited; a live member that fails to
// answer is kept (see Failed).
func (l *ClaimLog) SweepUntilHalted(every time.Duration, set func() []Member) (halt func()) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	l.sweep(&wg, stop, every, set)
	return func() { once.Do(func() { close(stop) }); wg.Wait() }
}

func (l *ClaimLog) sweep(wg *sync.WaitGroup, stop <-chan struct{}, every time.Duration, set func() []Member) {
	busy := map[*Sidecar]*atomic.Bool{}
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
				if busy[m.Sidecar] == nil {
					busy[m.Sidecar] = &atomic.Bool{}
				}
				b := busy[m.Sidecar]
				if !m.Sidecar.Alive() || !b.CompareAndSwap(false, true) {
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
func (l *ClaimLog) ask(m Member, n int) {
	sent := time.Now()
	st, err := m.Sidecar.Leader()
	at := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		if m.Sidecar.Alive() {
			if l.errs == nil {
				l.errs = map[string]error{}
			}
			l.errs[m.Name] = err
		}
		return
	case st.Leader:
		l.claims = append(l.claims, Claim{m.Name, Term{m.Epoch, *st.Token}, n, sent, at})
	default:
		l.denies = append(l.denies, Claim{m.Name, Term{}, n, sent, at})
	}
	l.asked++
}

// Sweeps is how many sweeps have begun.
func (l *ClaimLog) Sweeps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sweeps)
}

// Asked is how many requests of the sweeps were answered.
func (l *ClaimLog) Asked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// Failed is the last error of each named member that was alive when it
// did not answer.
func (l *ClaimLog) Failed(names ...string) map[string]error {
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

// Leaderless is the longest run of sweeps begun in [from, to) in which
// nobody answered leader:true, as the time from the first to the last of
// them plus one interval (0: every sweep had a leader).
func (l *ClaimLog) Leaderless(from, to time.Time, every time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	led := map[int]bool{}
	for _, c := range l.claims {
		led[c.Sweep] = true
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

// Denials is every leader:false answer of the sweeps that who gave in
// [from, to).
func (l *ClaimLog) Denials(who string, from, to time.Time) []Claim {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Claim
	for _, c := range l.denies {
		if c.Who == who && !c.Answer.Before(from) && c.Answer.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

// FirstClaim is who made the first claim of tm and when it arrived (zero:
// never).
func (l *ClaimLog) FirstClaim(tm Term) (who string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.claims {
		if c.Term == tm && (at.IsZero() || c.Answer.Before(at)) {
			who, at = c.Who, c.Answer
		}
	}
	return who, at
}

// LastSent is when the last claim of tm was sent (zero: never).
func (l *ClaimLog) LastSent(tm Term) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, c := range l.claims {
		if c.Term == tm && c.Sent.After(last) {
			last = c.Sent
		}
	}
	return last
}
