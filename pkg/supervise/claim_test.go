//go:build unix

package supervise

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// step is something the test does at an instant after the start: send an
// order, or let CMD exit (exit true).
type step struct {
	at   time.Duration
	o    order
	exit bool
}

// claimAt is a claim that ends d after the start.
func claimAt(start time.Time, d time.Duration) order {
	return order{kind: claimOrder, until: start.Add(d)}
}

// The enforcer against a fake CMD group, in a bubble whose clock starts at
// the start: every signal it sends, when, and what it reports. Each case
// runs for 10 s of the bubble's time.
func TestEnforcerStopsTheCommandWhenTheClaimItLastHeardOfEnds(t *testing.T) {
	const grace = 500 * time.Millisecond
	s := time.Second
	cases := []struct {
		name   string
		first  time.Duration // the first claim's end
		steps  func(start time.Time) []step
		want   []string // "<at> <signal>"
		events []event
	}{
		{"no renewal: SIGTERM and SIGCONT at the claim's end, SIGKILL after the grace", 2 * s, nil,
			[]string{"2s terminated", "2s continued", "2.5s killed"}, []event{claimEnded, killed}},
		{"renewals postpone the end", 2 * s, func(start time.Time) []step {
			return []step{{at: s, o: claimAt(start, 3*s)}, {at: 2 * s, o: claimAt(start, 4*s)}}
		}, []string{"4s terminated", "4s continued", "4.5s killed"}, []event{claimEnded, killed}},
		{"the claim last heard of counts, even if it ends sooner", 5 * s, func(start time.Time) []step {
			return []step{{at: s, o: claimAt(start, 3*s)}}
		}, []string{"3s terminated", "3s continued", "3.5s killed"}, []event{claimEnded, killed}},
		{"CMD exits within the grace: no SIGKILL", 2 * s, func(time.Time) []step {
			return []step{{at: 2200 * time.Millisecond, exit: true}}
		}, []string{"2s terminated", "2s continued"}, []event{claimEnded}},
		{"stop: at once, SIGKILL after the grace, nothing reported but the SIGKILL", 5 * s, func(time.Time) []step {
			return []step{{at: s, o: order{kind: stopOrder}}}
		}, []string{"1s terminated", "1s continued", "1.5s killed"}, []event{killed}},
		{"a claim after a stop changes nothing", 5 * s, func(start time.Time) []step {
			return []step{{at: s, o: order{kind: stopOrder}}, {at: 1100 * time.Millisecond, o: claimAt(start, 9*s)},
				{at: 1200 * time.Millisecond, o: order{kind: stopOrder}}}
		}, []string{"1s terminated", "1s continued", "1.5s killed"}, []event{killed}},
		{"a claim after the end changes nothing", 2 * s, func(start time.Time) []step {
			return []step{{at: 2100 * time.Millisecond, o: claimAt(start, 9*s)}}
		}, []string{"2s terminated", "2s continued", "2.5s killed"}, []event{claimEnded, killed}},
		{"a first claim that has ended stops CMD at once", 0, nil,
			[]string{"0s terminated", "0s continued", "500ms killed"}, []event{claimEnded, killed}},
		{"signals are passed on in order, the claim still enforced", 2 * s, func(time.Time) []step {
			return []step{{at: 500 * time.Millisecond, o: order{kind: signalOrder, sig: syscall.SIGTSTP}},
				{at: 700 * time.Millisecond, o: order{kind: signalOrder, sig: syscall.SIGCONT}},
				{at: 800 * time.Millisecond, o: order{kind: signalOrder, sig: syscall.SIGINT}}}
		}, []string{"500ms stopped", "700ms continued", "800ms interrupt", "2s terminated", "2s continued", "2.5s killed"},
			[]event{claimEnded, killed}},
		{"the lock gone: SIGKILL at once", 5 * s, func(time.Time) []step {
			return []step{{at: s, o: order{kind: lockGoneOrder}}}
		}, []string{"1s killed"}, nil},
		{"the lock gone while stopping: SIGKILL at once", 2 * s, func(time.Time) []step {
			return []step{{at: 2100 * time.Millisecond, o: order{kind: lockGoneOrder}}}
		}, []string{"2s terminated", "2s continued", "2.1s killed"}, []event{claimEnded}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var (
					mu     sync.Mutex
					got    []string
					events []event
				)
				e := &enforcer{
					grace: grace,
					signal: func(sig syscall.Signal) {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, fmt.Sprintf("%v %v", time.Since(start), sig))
					},
					report: func(ev event) {
						mu.Lock()
						defer mu.Unlock()
						events = append(events, ev)
					},
				}
				orders, done := make(chan order), make(chan struct{})
				finished := make(chan struct{})
				go func() {
					defer close(finished)
					e.run(start.Add(c.first), orders, done)
				}()
				var steps []step
				if c.steps != nil {
					steps = c.steps(start)
				}
				exited := false
				for _, st := range steps {
					time.Sleep(start.Add(st.at).Sub(time.Now()))
					if st.exit {
						close(done)
						exited = true
						continue
					}
					orders <- st.o
				}
				time.Sleep(start.Add(10 * time.Second).Sub(time.Now()))
				if !exited {
					close(done)
				}
				<-finished
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(got, c.want) || !slices.Equal(events, c.events) {
					t.Fatalf("signals %q, events %v; want %q, %v", got, events, c.want, c.events)
				}
			})
		})
	}
}
