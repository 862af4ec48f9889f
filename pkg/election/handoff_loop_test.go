package election

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// TestLoopHandoff runs three candidates' loops on one memory store in
// virtual time: the accept rides the change signal, so the hand-off is
// done at the leader's first poll after its offer, with the next token,
// and the new leader keeps leading.
func TestLoopHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var all []*running
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, start(t, store.Open("loop"), id, true))
		}
		// Off the renewal schedule: a renewal due at the very instant of
		// the hand-off would wait for it on a mutex, which a synctest
		// bubble does not count as blocked, and virtual time would stop.
		time.Sleep(time.Minute + DefaultRetryPeriod/2)
		old := soleLeader(t, all...)
		token := old.Status().Token
		target := others(all, old)[0]

		began := time.Now()
		status, err := old.Handoff(t.Context(), target.Status().Identity)
		if err != nil || status.Leader || status.Holder != target.Status().Identity {
			t.Fatalf("Handoff: %+v, %v", status, err)
		}
		synctest.Wait()
		if took := time.Since(began); took != handoffPoll {
			t.Fatalf("the hand-off took %v of virtual time, want one poll (%v)", took, handoffPoll)
		}
		if soleLeader(t, all...) != target || target.Status().Token != token+1 {
			t.Fatalf("after the hand-off: %+v leads, want %s with token %d", soleLeader(t, all...).Status(), target.Status().Identity, token+1)
		}
		for range 100 {
			time.Sleep(DefaultRetryPeriod)
			if s := soleLeader(t, all...); s != target || s.Status().Token != token+1 {
				t.Fatalf("leadership moved on after the hand-off: %+v", s.Status())
			}
		}
	})
}
