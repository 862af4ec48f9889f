package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// The schema of the releases before planned hand-offs, and the statements
// such a release writes with.
const (
	oldSchema = `CREATE TABLE leader_records (
	name                   TEXT PRIMARY KEY,
	version                INTEGER NOT NULL,
	holder                 TEXT NOT NULL,
	lease_duration_seconds INTEGER NOT NULL,
	acquire_time_us        INTEGER,
	renew_time_us          INTEGER,
	transitions            INTEGER NOT NULL
)`
	oldInsert = `INSERT INTO leader_records (name, version, holder, lease_duration_seconds,
	acquire_time_us, renew_time_us, transitions) VALUES ('old-new', 90, 'old-release', 15, NULL, NULL, 3)`
	oldUpdate = `UPDATE leader_records SET version = 91, holder = 'old-release', transitions = 8 WHERE name = 'e'`
)

// TestOldFileGetsTheMarkColumns opens a file made by a release without
// hand-offs or group marks: Open adds both columns, the stored record
// reads back without a marker or mark, both can be written, and the old
// release's own statements still work on the file, leaving them as they
// find them.
func TestOldFileGetsTheMarkColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	conn := rawConn(t, path)
	for _, stmt := range []string{
		oldSchema,
		`INSERT INTO leader_records VALUES ('e', 7, 'a_1', 15, 1000000, 2000000, 4)`,
	} {
		if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	b := openT(t, path, "e")
	got, v, err := b.Get(ctxT(t))
	if err != nil {
		t.Fatalf("Get after the migration: %v", err)
	}
	if !got.Handoff.IsZero() || !got.Group.IsZero() || got.HolderIdentity != "a_1" || got.Transitions != 4 || v != "7" {
		t.Fatalf("the old row reads as %+v at %q, want holder a_1, token 4, version 7, no marker", got, v)
	}
	offer := backendtest.SampleRecord("a_1", 4)
	offer.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: "a_1", To: "b", Token: 4}
	offer.Group = backend.GroupMark{Shards: 4}
	if _, err := b.Update(ctxT(t), v, offer); err != nil {
		t.Fatalf("Update with a marker: %v", err)
	}
	if got, _, _ := b.Get(ctxT(t)); got.Handoff != offer.Handoff || got.Group != offer.Group {
		t.Fatalf("marker and mark read back as %+v, %+v, want %+v, %+v", got.Handoff, got.Group, offer.Handoff, offer.Group)
	}

	for _, stmt := range []string{oldInsert, oldUpdate} {
		if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("an older release's %q on the migrated file: %v", stmt, err)
		}
	}
	if got, _, _ := b.Get(ctxT(t)); got.Transitions != 8 || got.Handoff != offer.Handoff || got.Group != offer.Group {
		t.Fatalf("after the older release's update: %+v, want token 8 and the marker and mark kept", got)
	}
	if got, _, err := openT(t, path, "old-new").Get(ctxT(t)); err != nil || !got.Handoff.IsZero() {
		t.Fatalf("a row the older release inserted: %+v, %v; want it without a marker", got, err)
	}

	// A second Open finds the column and changes nothing.
	if _, _, err := openT(t, path, "e").Get(ctxT(t)); err != nil {
		t.Fatalf("Get after a second Open: %v", err)
	}
}

// TestMalformedHandoffReadsAsNone: a marker edited by hand into something
// the election never writes is read as no marker, not as an error.
func TestMalformedHandoffReadsAsNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openT(t, path, "e")
	if _, err := b.Create(ctxT(t), backendtest.SampleRecord("a_1", 2)); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, path)
	for _, text := range []string{`{`, `{"phase":"steal","from":"a_1","token":2}`, `[1,2]`, `{"phase":"offer","token":2}`} {
		if _, err := conn.ExecContext(ctxT(t), `UPDATE leader_records SET handoff = ?, version = version + 1 WHERE name = 'e'`, text); err != nil {
			t.Fatal(err)
		}
		got, _, err := b.Get(ctxT(t))
		if err != nil || !got.Handoff.IsZero() || got.HolderIdentity != "a_1" {
			t.Fatalf("handoff %q read as %+v, %v; want the record without a marker", text, got, err)
		}
	}
}
