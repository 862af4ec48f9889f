package apiserver

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// editLease applies edit to the live Lease (Get, edit the spec, Update,
// again on a conflict with a renewal) and returns the instants just before
// the Update that went through and just after it.
func editLease(k *sidecartest.KubeEnv, ns, name string, edit func(*coordinationv1.LeaseSpec)) (before, after time.Time, err error) {
	leases := k.Client.CoordinationV1().Leases(ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(&l.Spec)
		before = time.Now()
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	return before, time.Now(), err
}

// lastClaim is when the last claim of token tok was sent.
func lastClaim(claims []sidecartest.Answer, tok int64) time.Time {
	var last time.Time
	for _, c := range claims {
		if *c.State.Token == tok && c.Sent.After(last) {
			last = c.Sent
		}
	}
	return last
}

func TestLeaseDeletedIsRecreatedAboveTheLastToken(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	ns, name := k.Namespace(t), "deleted"
	all := leaseSidecars(t, k, ns, name)
	old, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
	rec := sidecartest.Record(t, all)

	deleted := time.Now()
	if err := k.Client.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the Lease: %v", err)
	}
	// The leader, still inside its claim, recreates the Lease at its next
	// renewal, at most a renew interval on; the standbys, which saw a
	// holder, would wait a lease duration from the deletion.
	leader := sidecartest.AwaitToken(t, all, token+1, sidecartest.RenewInterval+time.Second)
	took := time.Since(deleted)
	if leader != old {
		t.Fatalf("a standby recreated the Lease %v after the deletion; the leader, still claiming, should have", took)
	}
	sidecartest.Steady(t, all, leader, token+1, sidecartest.LeaseDuration+sidecartest.RetryPeriod)
	k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, leader), token+1)

	// No overlap, and no gap: the leader claims token t, then t+1.
	claims, _, _ := rec.Check(t, token, 0)
	last := lastClaim(claims, token)
	for _, a := range rec.Answers() {
		if all[a.Who] == old && !a.State.Leader {
			t.Fatalf("the leader answered leader:false %v after the deletion", a.Sent.Sub(deleted))
		}
	}
	t.Logf("Lease recreated by the leader with token %d %v after the deletion (token %d last claimed %v after it); no overlap, no leader:false answer",
		token+1, took.Round(time.Millisecond), token, last.Sub(deleted).Round(time.Millisecond))
	sidecartest.AllAlive(t, all)
}

// TestLeaseHandEditedToNonsense edits the leader's live Lease by hand, as
// `kubectl edit` might, and checks that the election recovers as the rules
// in pkg/election say (t is the leader's token before the edit; "next
// attempt" is at most a retry period later):
//
//	edit                          stored  afterwards
//	leaseDurationSeconds removed  yes     same leader, token t throughout; its next renewal writes the duration again
//	renewTime removed             yes     same leader, token t throughout; its next renewal writes renewTime again
//	holderIdentity "ghost"        yes     the leader steps down at its next attempt (another holder); nobody leads
//	                                      until a full lease duration after the edit; then one candidate takes
//	                                      over with the edited record's leaseTransitions + 1 = t+1
//	leaseTransitions removed      yes     same leader, never a gap: at its next attempt it reads 0 (below t, the
//	                                      highest it has seen) and starts a new term t+1, never a lower token
//	holderIdentity removed        yes     an emptied record that is not a release (its duration and times are
//	                                      kept): the standbys wait it out; the leader, still inside its claim,
//	                                      takes it back at its next attempt with t+1, never a gap
//	leaseDurationSeconds 0        no      rejected by validation (422); same leader, token t throughout
//	leaseTransitions -1           no      rejected by validation (422); same leader, token t throughout
//
// In every case no process exits, tokens never go below t, two terms never
// claim at one instant, and exactly one leader remains for a whole lease
// duration after recovery.
func TestLeaseHandEditedToNonsense(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	margin := 500 * time.Millisecond
	cases := []struct {
		name      string
		edit      func(*coordinationv1.LeaseSpec)
		rejected  bool
		same      bool          // the old leader never answers leader:false
		bump      int64         // the token afterwards is t+bump
		notBefore time.Duration // after the edit, no new term earlier than this
		within    time.Duration // ... and one by then
		repaired  func(coordinationv1.LeaseSpec) bool
	}{
		{name: "no-duration", edit: func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = nil },
			same: true, within: margin, repaired: func(s coordinationv1.LeaseSpec) bool {
				return s.LeaseDurationSeconds != nil && *s.LeaseDurationSeconds == int32(sidecartest.LeaseDuration/time.Second)
			}},
		{name: "no-renew-time", edit: func(s *coordinationv1.LeaseSpec) { s.RenewTime = nil },
			same: true, within: margin, repaired: func(s coordinationv1.LeaseSpec) bool { return s.RenewTime != nil }},
		// The lower bound allows for a standby whose Get that first saw
		// the edit was sent a moment before the edit landed.
		{name: "ghost-holder", edit: func(s *coordinationv1.LeaseSpec) { s.HolderIdentity = ptr.To("ghost") },
			bump: 1, notBefore: sidecartest.LeaseDuration - 200*time.Millisecond, within: sidecartest.LeaseDuration + 3*sidecartest.RetryPeriod},
		{name: "no-transitions", edit: func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = nil },
			same: true, bump: 1, within: sidecartest.RenewInterval + margin},
		{name: "no-holder", edit: func(s *coordinationv1.LeaseSpec) { s.HolderIdentity = nil },
			same: true, bump: 1, within: sidecartest.RenewInterval + margin},
		{name: "zero-duration", edit: func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](0) },
			rejected: true, same: true, within: margin},
		{name: "negative-transitions", edit: func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr.To[int32](-1) },
			rejected: true, same: true, within: margin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns, name := k.Namespace(t), "edited"
			all := leaseSidecars(t, k, ns, name)
			old, token := sidecartest.AwaitSettledLeader(t, all, 15*time.Second)
			oldIdx := 0
			for i, s := range all {
				if s == old {
					oldIdx = i
				}
			}
			rec := sidecartest.Record(t, all)

			before, after, err := editLease(k, ns, name, c.edit)
			if c.rejected != (err != nil) || (c.rejected && !apierrors.IsInvalid(err)) {
				t.Fatalf("edit: err %v, want it rejected as invalid: %v", err, c.rejected)
			}
			want := token + c.bump
			leader := sidecartest.AwaitToken(t, all, want, c.within)
			settled := time.Since(after)
			if c.same && leader != old {
				t.Fatal("another candidate leads; the edit should have left the leader in place")
			}
			if c.repaired != nil {
				sidecartest.WaitTrue(t, "the leader's renewal repairs the Lease", sidecartest.RenewInterval+margin, func() bool { return c.repaired(k.Lease(t, ns, name).Spec) })
			}
			repairedAfter := time.Since(after)
			// A whole lease duration: a standby that misjudged the edited
			// record as expired would take over within it.
			sidecartest.Steady(t, all, leader, want, sidecartest.LeaseDuration+sidecartest.RetryPeriod)
			k.LeaseShows(t, ns, name, sidecartest.IdentityOf(t, leader), want)
			claims, first, overlap := rec.Check(t, token, 0)
			sidecartest.AllAlive(t, all)

			for _, a := range rec.Answers() {
				if c.same && a.Who == oldIdx && !a.State.Leader {
					t.Fatalf("the leader answered leader:false %v after the edit", a.Sent.Sub(after))
				}
			}
			if c.rejected {
				t.Logf("rejected, token %d kept: %v", token, err)
				return
			}
			if c.bump == 0 {
				t.Logf("token %d kept; Lease repaired %v after the edit", token, repairedAfter.Round(time.Millisecond))
				return
			}
			if last := lastClaim(claims, token); last.Sub(after) > sidecartest.RenewInterval+300*time.Millisecond {
				t.Fatalf("token %d still claimed %v after the edit", token, last.Sub(after))
			}
			if began := first[want].Sub(before); began < c.notBefore {
				t.Fatalf("term %d began %v after the edit, before %v", want, began, c.notBefore)
			}
			t.Logf("token %d -> %d (same holder: %v): first claimed %v after the edit, single leader after %v, old term last claimed %v after the edit, overlap %v",
				token, want, leader == old, first[want].Sub(after).Round(time.Millisecond), settled.Round(time.Millisecond),
				lastClaim(claims, token).Sub(after).Round(time.Millisecond), overlap.Round(time.Millisecond))
		})
	}
}
