package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// ReadAll returns every election of the file, sorted, as Get reads each,
// while handles hold the file open; it writes nothing (the file's bytes
// and its version counter are as they were).
func TestReadAllReadsEveryElection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	want := map[string]backend.Record{}
	for i, name := range []string{"web", "billing", "cron"} {
		b := openT(t, path, name)
		rec := backendtest.SampleRecord(name+"-0_x", int64(i+1))
		if name == "billing" {
			rec.Handoff = backend.Handoff{Phase: backend.HandoffOffer, From: rec.HolderIdentity, To: "billing-1", Token: rec.Transitions}
		}
		if _, err := b.Create(ctxT(t), rec); err != nil {
			t.Fatal(err)
		}
		want[name] = rec
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := ReadAll(ctxT(t), path)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Election)
		b := openT(t, path, s.Election)
		rec, v, err := b.Get(ctxT(t))
		if err != nil || !reflect.DeepEqual(rec, s.Record) || v != s.Version || !reflect.DeepEqual(rec, want[s.Election]) {
			t.Fatalf("%s: ReadAll %+v at %s, Get %+v at %s (%v), written %+v", s.Election, s.Record, s.Version, rec, v, err, want[s.Election])
		}
	}
	if strings.Join(names, ",") != "billing,cron,web" {
		t.Fatalf("elections %v, want billing, cron, web in order", names)
	}
	if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
		t.Fatalf("the file changed under ReadAll (%v)", err)
	}
}

// ReadAll creates nothing: a missing path stays missing, and a database
// of someone else's is refused, naming the path, and left as it was.
func TestReadAllRefusesWhatIsNoElectionFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := ReadAll(ctxT(t), missing); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("ReadAll created %s (%v)", missing, err)
	}
	other := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err = ReadAll(ctxT(t), other)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "holds no elections") {
		t.Fatalf("another database: %v", err)
	}
	if _, err := ReadAll(ctxT(t), dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("a directory: %v", err)
	}
}
