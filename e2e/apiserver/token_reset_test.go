package apiserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The README's recovery from tokens that went back: the operator raises
// the stored token to the highest a resource has accepted, and the leader
// starts a new term above it, which the resource accepts again.
func TestOperatorRaisesTheTokenAboveWhatResourcesAccepted(t *testing.T) {
	t.Parallel()
	const accepted = 41 // the highest token a resource accepted before the reset
	for _, c := range []struct {
		name  string
		start func(t *testing.T) (all []*sidecartest.Sidecar, raise func(token int64))
	}{
		{"lease", func(t *testing.T) ([]*sidecartest.Sidecar, func(int64)) {
			k := sidecartest.Kube(t)
			ns, name := k.Namespace(t), "billing"
			kc := k.Kubeconfig(t, "")
			all := []*sidecartest.Sidecar{sidecartest.LeaseSidecar(t, kc, ns, name, "app-0"), sidecartest.LeaseSidecar(t, kc, ns, name, "app-1")}
			return all, func(token int64) {
				// kubectl patch lease billing --type merge -p '{"spec":{"leaseTransitions":41}}'
				patch := fmt.Sprintf(`{"spec":{"leaseTransitions":%d}}`, token)
				if _, err := k.Client.CoordinationV1().Leases(ns).Patch(context.Background(), name,
					types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"sqlite", func(t *testing.T) ([]*sidecartest.Sidecar, func(int64)) {
			db := sidecartest.DBPath(t)
			all := sidecartest.StartMany(t, db, 2)
			return all, func(token int64) {
				// sqlite3 election.db "UPDATE leader_records SET transitions = 41,
				//   version = version + 1 WHERE name = 'leader-sidecar'"
				h, err := sql.Open("sqlite", db)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				res, err := h.Exec(`UPDATE leader_records SET transitions = ?, version = version + 1`, token)
				if n, _ := res.RowsAffected(); err != nil || n != 1 {
					t.Fatalf("update: %v (%d rows)", err, n)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			all, raise := c.start(t)
			leader, token := sidecartest.AwaitLeader(t, all, 3*sidecartest.LeaseDuration)
			if token >= accepted {
				t.Fatalf("token %d already past the resource's %d", token, accepted)
			}
			guard := fence.NewMemoryGuard()
			write := func() error { return nil }
			if err := guard.Do("billing", fence.TermID{Token: accepted, Holder: "before-the-reset"}, write); err != nil {
				t.Fatal(err)
			}
			id := sidecartest.IdentityOf(t, leader)
			if err := guard.Do("billing", fence.TermID{Token: token, Holder: id}, write); !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("the reset leader's write with token %d: %v, want ErrStaleToken", token, err)
			}

			raised := time.Now()
			raise(accepted)
			var st sidecartest.State
			for {
				var err error
				if st, err = leader.Leader(); err == nil && st.Leader && st.Token != nil && *st.Token == accepted+1 {
					break
				}
				if time.Since(raised) > sidecartest.LeaseDuration {
					t.Fatalf("leader's state %+v (%v) %v after the token was raised to %d, want token %d",
						st, err, time.Since(raised), accepted, accepted+1)
				}
				time.Sleep(10 * time.Millisecond)
			}
			took := time.Since(raised)
			if st.Identity != id {
				t.Fatalf("the new term belongs to %s, want the leader %s", st.Identity, id)
			}
			if err := guard.Do("billing", fence.TermID{Token: *st.Token, Holder: id}, write); err != nil {
				t.Fatalf("the write after the raise: %v", err)
			}
			t.Logf("token raised to %d; the leader wrote with %d after %v", accepted, *st.Token, took.Round(time.Millisecond))
		})
	}
}
