package e2e

import (
	"sync"
	"testing"
	"time"
)

// claim is one leader:true answer and the window it was given in.
type claim struct {
	token        int64
	sent, answer time.Time
}

// claimLog collects every leader claim the samplers see.
type claimLog struct {
	mu     sync.Mutex
	claims []claim
}

func (l *claimLog) add(c claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, c)
}

// check fails t if an answer of an older term was sent after an answer of
// a newer term had arrived, and returns the terms seen.
func (l *claimLog) check(t *testing.T) map[int64]int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	terms := map[int64]int{}
	for _, old := range l.claims {
		terms[old.token]++
		for _, newer := range l.claims {
			if old.token < newer.token && old.sent.After(newer.answer) {
				t.Fatalf("term %d claimed leadership after term %d already had", old.token, newer.token)
			}
		}
	}
	return terms
}

// sample polls s's /leader as fast as it answers until stop is closed,
// logging every leader:true answer. On an error it calls onErr and stops
// if onErr returns false.
func (l *claimLog) sample(wg *sync.WaitGroup, stop <-chan struct{}, s *sidecar, onErr func(error) bool) {
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
				l.add(claim{*st.Token, sent, time.Now()})
			}
		}
	})
}
