package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestRecordsCannotBeDeleted: a DELETE on the records table, as an operator
// "resetting" an election by hand would run, fails with a message that says
// how to reset it, and the record stays; on a file made before the rule
// (no trigger) Open adds it.
func TestRecordsCannotBeDeleted(t *testing.T) {
	for _, made := range []string{"new", "older release"} {
		t.Run(made, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leader.db")
			conn := rawConn(t, path)
			if made != "new" {
				for _, stmt := range []string{createRecords, createVersions,
					`INSERT INTO leader_records (name, version, holder, lease_duration_seconds, acquire_time_us, renew_time_us, transitions, handoff)
					VALUES ('e', 7, 'a_1', 15, 1000000, 2000000, 4, '')`} {
					if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
						t.Fatalf("%s: %v", stmt, err)
					}
				}
			}
			b := openT(t, path, "e")
			if made == "new" {
				if _, err := b.Create(ctxT(t), backendtest.SampleRecord("a_1", 4)); err != nil {
					t.Fatalf("Create: %v", err)
				}
			}
			_, err := conn.ExecContext(ctxT(t), `DELETE FROM leader_records WHERE name = 'e'`)
			if err == nil || !strings.Contains(err.Error(), "sidecar reset") {
				t.Fatalf("DELETE of a record: %v, want it refused with a message naming sidecar reset", err)
			}
			if rec, _, err := b.Get(ctxT(t)); err != nil || rec.Transitions != 4 {
				t.Fatalf("after the refused DELETE: %+v, %v; want the record at token 4", rec, err)
			}
		})
	}
}

// TestNeverCreatedOnlyWhenProvable: Get reports ErrNeverCreated (with
// ErrNotFound) for an election absent from a file whose rows could never
// be deleted, and ErrNotFound alone for an election absent from a file
// made before the rule, where a row may have been deleted by hand.
func TestNeverCreatedOnlyWhenProvable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	_, _, err := openT(t, path, "e").Get(ctxT(t))
	if !errors.Is(err, backend.ErrNotFound) || !errors.Is(err, backend.ErrNeverCreated) {
		t.Fatalf("Get on a new file: %v, want ErrNotFound and ErrNeverCreated", err)
	}

	old := filepath.Join(t.TempDir(), "old.db")
	conn := rawConn(t, old)
	for _, stmt := range []string{createRecords, createVersions,
		`INSERT INTO leader_versions VALUES (1, 9)`} { // a record was written, and deleted
		if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	_, _, err = openT(t, old, "e").Get(ctxT(t))
	if !errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrNeverCreated) {
		t.Fatalf("Get on a file whose records may have been deleted: %v, want ErrNotFound alone", err)
	}
}
