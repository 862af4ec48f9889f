package sidecartest

import (
	"sync"
	"testing"
	"time"
)

// Answer is one GET /leader answer from the sidecar numbered Who, sent and
// received at the two instants.
type Answer struct {
	Who      int
	State    State
	Sent, At time.Time
}

// Recorder polls every sidecar of a set in the background and keeps every
// answer.
type Recorder struct {
	mu      sync.Mutex
	answers []Answer
	failed  []error // a live sidecar that did not answer
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// Record asks every sidecar of all GET /leader every 5ms until Halt (or
// Check, or the end of t); an answer's Who is the sidecar's index in all.
func Record(t testing.TB, all []*Sidecar) *Recorder {
	r := &Recorder{stop: make(chan struct{})}
	for i, s := range all {
		r.wg.Go(func() {
			for {
				select {
				case <-r.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				sent := time.Now()
				st, err := s.Leader()
				r.mu.Lock()
				if err == nil {
					r.answers = append(r.answers, Answer{i, st, sent, time.Now()})
				} else if s.Alive() {
					r.failed = append(r.failed, err)
				}
				r.mu.Unlock()
			}
		})
	}
	t.Cleanup(r.Halt)
	return r
}

// Halt stops the recorder and waits for its pollers.
func (r *Recorder) Halt() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

// Answers is a copy of every answer so far.
func (r *Recorder) Answers() []Answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Answer(nil), r.answers...)
}

// Check halts the recorder and judges its answers with CheckAnswers.
func (r *Recorder) Check(t testing.TB, floor int64, overlap time.Duration) ([]Answer, map[int64]time.Time, time.Duration) {
	t.Helper()
	r.Halt()
	return CheckAnswers(t, r.answers, r.failed, floor, overlap)
}

// CheckAnswers fails t if a live sidecar did not answer (failed), if a
// claim carried a token below floor, if two sidecars claimed the same
// token, or if a term was still claimed more than overlap after the first
// claim of a newer term had arrived (0: never after). It returns the
// claims, the first answer of each term, and the longest overlap seen.
func CheckAnswers(t testing.TB, answers []Answer, failed []error, floor int64, overlap time.Duration) ([]Answer, map[int64]time.Time, time.Duration) {
	t.Helper()
	if len(failed) > 0 {
		t.Fatalf("a live sidecar did not answer GET /leader: %v", failed[0])
	}
	var claims []Answer
	first := map[int64]time.Time{}
	holder := map[int64]int{}
	for _, a := range answers {
		if !a.State.Leader {
			continue
		}
		if a.State.Token == nil {
			t.Fatalf("sidecar %d claimed leadership without a token", a.Who)
		}
		tok := *a.State.Token
		if tok < floor {
			t.Fatalf("sidecar %d claimed token %d, below %d seen before", a.Who, tok, floor)
		}
		if h, ok := holder[tok]; ok && h != a.Who {
			t.Fatalf("sidecars %d and %d both claimed token %d", h, a.Who, tok)
		}
		holder[tok] = a.Who
		if f, ok := first[tok]; !ok || a.At.Before(f) {
			first[tok] = a.At
		}
		claims = append(claims, a)
	}
	var longest time.Duration
	for _, c := range claims {
		for tok, f := range first {
			if tok > *c.State.Token && c.Sent.After(f) {
				longest = max(longest, c.Sent.Sub(f))
			}
		}
	}
	if longest > overlap {
		t.Fatalf("an older term was still claimed %v after a newer term's first claim (allowed: %v)", longest, overlap)
	}
	return claims, first, longest
}
