package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// term orders leadership terms. Tokens order the terms of one store; a
// store made anew (epoch + 1) starts its tokens at 1 again, and each of
// its terms is newer than every term of the stores before it.
type term struct {
	epoch int
	token int64
}

func (a term) older(b term) bool {
	return a.epoch < b.epoch || (a.epoch == b.epoch && a.token < b.token)
}

func (a term) String() string {
	if a.epoch == 0 {
		return fmt.Sprint(a.token)
	}
	return fmt.Sprintf("%d/%d", a.epoch, a.token)
}

// claim is one leader:true answer and the window it was given in.
type claim struct {
	who          string
	term         term
	sweep        int // the sweep that asked, or -1
	sent, answer time.Time
}

// claimLog collects every leader claim the samplers see.
type claimLog struct {
	mu     sync.Mutex
	claims []claim
	sweeps []time.Time      // when each sweep began
	asked  int              // requests answered
	errs   map[string]error // per member, the last error of a live process
}

func (l *claimLog) add(c claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, c)
}

// overlaps counts the claims of an older term sent after a claim of a
// newer term had arrived (at that instant both terms claimed leadership),
// and the longest such lag.
func (l *claimLog) overlaps() (n int, longest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := map[term]time.Time{}
	for _, c := range l.claims {
		if f, ok := first[c.term]; !ok || c.answer.Before(f) {
			first[c.term] = c.answer
		}
	}
	for _, c := range l.claims {
		for tm, f := range first {
			if c.term.older(tm) && c.sent.After(f) {
				n++
				longest = max(longest, c.sent.Sub(f))
				break
			}
		}
	}
	return n, longest
}

// doubles counts the sweeps in which two members answered leader:true.
func (l *claimLog) doubles() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	who := map[int]string{}
	n := 0
	for _, c := range l.claims {
		if c.sweep < 0 {
			continue
		}
		if w, ok := who[c.sweep]; ok && w != c.who {
			n++
			who[c.sweep] = "" // count each sweep once
			continue
		}
		if _, ok := who[c.sweep]; !ok {
			who[c.sweep] = c.who
		}
	}
	return n
}

// check fails t if two terms ever claimed at one instant (overlaps,
// doubles), and returns the claims seen per term.
func (l *claimLog) check(t *testing.T) map[term]int {
	t.Helper()
	if n, longest := l.overlaps(); n > 0 {
		t.Fatalf("%d claims of an older term were sent after a newer term had claimed (longest %v after)", n, longest)
	}
	if n := l.doubles(); n > 0 {
		t.Fatalf("%d sweeps had two leader:true answers", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	terms := map[term]int{}
	for _, c := range l.claims {
		terms[c.term]++
	}
	return terms
}

// sample polls s's /leader as fast as it answers until stop is closed,
// logging every leader:true answer. On an error it calls onErr and stops
// if onErr returns false.
func (l *claimLog) sample(wg *sync.WaitGroup, stop <-chan struct{}, s *sidecar, onErr func(error) bool) {
	who := fmt.Sprint(s.cmd.Process.Pid)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			st, err := s.leader()
			switch {
			case err != nil:
				if !onErr(err) {
					return
				}
			case st.Leader:
				l.add(claim{who, term{0, *st.Token}, -1, sent, time.Now()})
			}
		}
	})
}
