package sqlite

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// TestBadStoredData reads rows written by something other than this
// package into a table without NOT NULL constraints: NULLs read as zero,
// out-of-range values are returned as they are or clamped, wrong types are
// an error naming the column, and nothing panics.
func TestBadStoredData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	conn := rawConn(t, path)
	for _, stmt := range []string{
		`CREATE TABLE leader_records (name TEXT PRIMARY KEY, version INTEGER, holder TEXT,
			lease_duration_seconds INTEGER, acquire_time_us INTEGER, renew_time_us INTEGER, transitions INTEGER)`,
		`INSERT INTO leader_records VALUES ('nulls', 5, NULL, NULL, NULL, NULL, NULL)`,
		`INSERT INTO leader_records VALUES ('negative', 6, 'h', -3, 0, -1, -7)`,
		`INSERT INTO leader_records VALUES ('huge', 7, 'h', 1099511627776, NULL, NULL, 1)`,
		`INSERT INTO leader_records VALUES ('tiny', 8, 'h', -1099511627776, NULL, NULL, 1)`,
		`INSERT INTO leader_records VALUES ('text', 9, 'h', 'fifteen', NULL, NULL, 1)`,
		`INSERT INTO leader_records VALUES ('real', 10, 'h', 15, 1.5, NULL, 1)`,
	} {
		if _, err := conn.ExecContext(ctxT(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	tests := []struct {
		name    string
		want    backend.Record
		version backend.Version
		errCol  string // non-empty: Get fails, naming this column
	}{
		{name: "nulls", version: "5"},
		{name: "negative", version: "6", want: backend.Record{HolderIdentity: "h", LeaseDurationSeconds: -3,
			AcquireTime: time.Unix(0, 0).UTC(), RenewTime: time.UnixMicro(-1).UTC(), Transitions: -7}},
		{name: "huge", version: "7", want: backend.Record{HolderIdentity: "h", LeaseDurationSeconds: math.MaxInt32, Transitions: 1}},
		{name: "tiny", version: "8", want: backend.Record{HolderIdentity: "h", LeaseDurationSeconds: math.MinInt32, Transitions: 1}},
		{name: "text", errCol: "lease_duration_seconds"},
		{name: "real", errCol: "acquire_time_us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openT(t, path, tt.name)
			got, v, err := b.Get(ctxT(t))
			if tt.errCol != "" {
				wantErrContains(t, err, path, "malformed", tt.errCol)
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			backendtest.AssertRecordEqual(t, got, tt.want)
			if v != tt.version {
				t.Fatalf("version %q, want %q", v, tt.version)
			}
			// The election can still take such a record over.
			if _, err := b.Update(ctxT(t), v, backendtest.SampleRecord("new", 2)); err != nil {
				t.Fatalf("Update from the bad record: %v", err)
			}
		})
	}
}
