package sidecartest

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Term orders leadership terms. Tokens order the terms of one store; a
// store made anew (Epoch + 1) starts its tokens at 1 again, and each of
// its terms is newer than every term of the stores before it.
type Term struct {
	Epoch int
	Token int64
}

func (a Term) older(b Term) bool {
	return a.Epoch < b.Epoch || (a.Epoch == b.Epoch && a.Token < b.Token)
}

func (a Term) String() string {
	if a.Epoch == 0 {
		return fmt.Sprint(a.Token)
	}
	return fmt.Sprintf("%d/%d", a.Epoch, a.Token)
}

// Claim is one leader:true answer and the window it was given in.
type Claim struct {
	Who          string
	Term         Term
	Sweep        int // the sweep that asked, or -1
	Sent, Answer time.Time
}

// ClaimLog collects every leader claim the samplers see. Its zero value is
// ready to use.
type ClaimLog struct {
	mu     sync.Mutex
	claims []Claim
	denies []Claim          // leader:false answers of the sweeps (Term zero)
	sweeps []time.Time      // when each sweep began
	asked  int              // requests answered
	errs   map[string]error // per member, the last error of a live process
}

// Add logs c.
func (l *ClaimLog) Add(c Claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, c)
}

// Claims is a copy of every claim logged so far.
func (l *ClaimLog) Claims() []Claim {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Claim(nil), l.claims...)
}

// Overlaps counts the claims of an older term sent after a claim of a
// newer term had arrived (at that instant both terms claimed leadership),
// and the longest such lag.
func (l *ClaimLog) Overlaps() (n int, longest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := map[Term]time.Time{}
	for _, c := range l.claims {
		if f, ok := first[c.Term]; !ok || c.Answer.Before(f) {
			first[c.Term] = c.Answer
		}
	}
	for _, c := range l.claims {
		for tm, f := range first {
			if c.Term.older(tm) && c.Sent.After(f) {
				n++
				longest = max(longest, c.Sent.Sub(f))
				break
			}
		}
	}
	return n, longest
}

// TwoLeaderSweeps counts the sweeps in which two members answered
// leader:true at what must have been one instant: with one term (a token
// claimed twice), or an older term's answer asked for only after a newer
// term's answer had arrived. The requests of a sweep are sent together
// but answered over some milliseconds (tens under load): an older term's
// answer and a newer term's whose windows overlap may be a hand-off
// between the two, and prove nothing either way, so they are not counted.
func (l *ClaimLog) TwoLeaderSweeps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	bySweep := map[int][]Claim{}
	for _, c := range l.claims {
		if c.Sweep >= 0 {
			bySweep[c.Sweep] = append(bySweep[c.Sweep], c)
		}
	}
	n := 0
	for _, claims := range bySweep {
		if twoAtOnce(claims) {
			n++
		}
	}
	return n
}

// twoAtOnce reports whether two of one sweep's claims, by two members,
// held at one instant for sure.
func twoAtOnce(claims []Claim) bool {
	for i, a := range claims {
		for _, b := range claims[i+1:] {
			if a.Who == b.Who {
				continue
			}
			older, newer := a, b
			if newer.Term.older(older.Term) {
				older, newer = newer, older
			}
			if older.Term == newer.Term || older.Sent.After(newer.Answer) {
				return true
			}
		}
	}
	return false
}

// AwaitSampled waits until a claim of token (of the first store) has been
// logged, failing t after a lease duration: a test that ends a term it saw
// through AwaitLeader waits for it first, so that a term shorter than one
// sample still appears in Check's terms.
func (l *ClaimLog) AwaitSampled(t testing.TB, token int64) {
	t.Helper()
	WaitTrue(t, fmt.Sprintf("the samplers saw term %d", token), LeaseDuration, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.claims {
			if c.Term == (Term{Token: token}) {
				return true
			}
		}
		return false
	})
}

// Check fails t if two terms ever claimed at one instant (a claim of an
// older term sent after a newer term's first claim arrived, or two
// members answering leader:true in one sweep), and returns the claims seen
// per term.
func (l *ClaimLog) Check(t testing.TB) map[Term]int {
	t.Helper()
	if n, longest := l.Overlaps(); n > 0 {
		t.Fatalf("%d claims of an older term were sent after a newer term had claimed (longest %v after)", n, longest)
	}
	if n := l.TwoLeaderSweeps(); n > 0 {
		t.Fatalf("%d sweeps had two leader:true answers", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	terms := map[Term]int{}
	for _, c := range l.claims {
		terms[c.Term]++
	}
	return terms
}

// CheckOneHolderPerTerm fails t if the claims of one term came from more
// than one replica: a token handed out twice.
func (l *ClaimLog) CheckOneHolderPerTerm(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	holders := map[Term]map[string]bool{}
	for _, c := range l.claims {
		if holders[c.Term] == nil {
			holders[c.Term] = map[string]bool{}
		}
		holders[c.Term][c.Who] = true
	}
	for term, who := range holders {
		if len(who) != 1 {
			t.Errorf("token %v was claimed by %d replicas", term, len(who))
		}
	}
}

// SampleUntilHalted samples every sidecar of all as Sample does, each
// on a goroutine of its own, until halt is called; halt returns once every
// sampler has stopped. onErr is Sample's, told which sidecar failed.
func (l *ClaimLog) SampleUntilHalted(all []*Sidecar, onErr func(s *Sidecar, err error) bool) (halt func()) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, s := range all {
		l.Sample(&wg, stop, s, func(err error) bool { return onErr(s, err) })
	}
	var once sync.Once
	return func() { // idempotent: callers may also register it with t.Cleanup
		once.Do(func() {
			close(stop)
			wg.Wait()
		})
	}
}

// Sample polls s's /leader as fast as it answers until stop is closed,
// logging every leader:true answer (who: its pid). On an error it calls
// onErr and stops if onErr returns false.
func (l *ClaimLog) Sample(wg *sync.WaitGroup, stop <-chan struct{}, s *Sidecar, onErr func(error) bool) {
	who := fmt.Sprint(s.Pid())
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			st, err := s.Leader()
			switch {
			case err != nil:
				if !onErr(err) {
					return
				}
			case st.Leader:
				l.Add(Claim{who, Term{0, *st.Token}, -1, sent, time.Now()})
			}
		}
	})
}
