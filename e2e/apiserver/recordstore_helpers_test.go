package apiserver

import (
	"context"
	"database/sql"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"

	_ "modernc.org/sqlite"
)

// recordStore is one election's store as an operator reaches it: start a
// sidecar in it, and change its record by hand.
type recordStore struct {
	start func(pod string) *sidecartest.Sidecar
	// remove deletes the record.
	remove func() error
	// empty sets the holder to "" and keeps the rest: lease duration,
	// times and token (an edit, not a release).
	empty func() error
	// release writes what a releasing leader writes, here and in
	// client-go: no holder, a lease of one second, acquire time equal to
	// renew time (now), the token kept.
	release func() error
	// shows fails t unless the stored record names holder with token.
	shows func(t *testing.T, holder string, token int64)
}

// leaseStore is a Lease on the shared API server; the record is changed
// with the API, as kubectl does.
func leaseStore(t *testing.T) recordStore {
	k := sidecartest.Kube(t)
	ns, name, kc := k.Namespace(t), "edited", k.Kubeconfig(t, "")
	edit := func(f func(*coordinationv1.LeaseSpec)) error {
		_, _, err := editLease(k, ns, name, f)
		return err
	}
	return recordStore{
		start: func(pod string) *sidecartest.Sidecar { return sidecartest.LeaseSidecar(t, kc, ns, name, pod) },
		remove: func() error {
			return k.Client.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		},
		empty: func() error { return edit(func(s *coordinationv1.LeaseSpec) { s.HolderIdentity = ptr.To("") }) },
		release: func() error {
			return edit(func(s *coordinationv1.LeaseSpec) {
				now := metav1.NewMicroTime(time.Now())
				s.HolderIdentity, s.LeaseDurationSeconds = ptr.To(""), ptr.To[int32](1)
				s.AcquireTime, s.RenewTime = &now, &now
			})
		},
		shows: func(t *testing.T, holder string, token int64) { k.LeaseShows(t, ns, name, holder, token) },
	}
}

// sqliteStore is a SQLite file; the record is changed with SQL from
// another process. An edit takes the file's next version, as the backend's
// own writes do, so that the candidates see a changed record (a Lease edit
// changes its resourceVersion the same way).
func sqliteStore(t *testing.T) recordStore {
	path := sidecartest.DBPath(t)
	// exec runs stmt in one write transaction; with next, after taking the
	// file's next version, passed as the first argument.
	exec := func(next bool, stmt string, args ...any) error {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
		if err != nil {
			return err
		}
		defer db.Close()
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if next {
			var version int64
			if err := tx.QueryRow(`UPDATE leader_versions SET last = last + 1 WHERE id = 1 RETURNING last`).Scan(&version); err != nil {
				return err
			}
			args = append([]any{version}, args...)
		}
		if _, err := tx.Exec(stmt, args...); err != nil {
			return err
		}
		return tx.Commit()
	}
	return recordStore{
		start: func(string) *sidecartest.Sidecar { return sidecartest.Start(t, path) },
		// The file refuses the DELETE until its trigger is dropped, as an
		// operator overriding that rule by hand would.
		remove: func() error {
			if err := exec(false, `DROP TRIGGER IF EXISTS leader_records_kept_on_delete`); err != nil {
				return err
			}
			return exec(false, `DELETE FROM leader_records`)
		},
		empty: func() error { return exec(true, `UPDATE leader_records SET version = ?, holder = ''`) },
		release: func() error {
			now := time.Now().UnixMicro()
			return exec(true, `UPDATE leader_records SET version = ?, holder = '', lease_duration_seconds = 1,
				acquire_time_us = ?, renew_time_us = ?`, now, now)
		},
		shows: func(t *testing.T, holder string, token int64) {
			t.Helper()
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var h string
			var tok int64
			if err := db.QueryRow(`SELECT holder, transitions FROM leader_records`).Scan(&h, &tok); err != nil {
				t.Fatalf("reading the record: %v", err)
			}
			if h != holder || tok != token {
				t.Fatalf("stored record holder=%q token=%d, want %q and %d", h, tok, holder, token)
			}
		},
	}
}
