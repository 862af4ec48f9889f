package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

func openElection(t *testing.T, path, name string) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, Election: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func resetCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), append([]string{"reset"}, args...), nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestResetReleasesTheRecordKeepingItsToken: a record whose holder no
// longer renews it (its lease of 1s passes unrenewed) and that carries a
// hand-off in progress is written back released, its token kept: the next
// leader's token is above it. A record already released is reset at once.
func TestResetReleasesTheRecordKeepingItsToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openElection(t, path, "billing")
	now := time.Now()
	stuck := backend.Record{HolderIdentity: "gone_1", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: 41,
		Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "gone_1", To: "b_2", Token: 41}}
	if _, err := b.Create(t.Context(), stuck); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing")
	if code != 0 {
		t.Fatalf("reset: exit %d, stderr %q", code, stderr)
	}
	rec, _, err := b.Get(t.Context())
	if err != nil || rec.HolderIdentity != "" || !rec.Handoff.IsZero() || rec.Transitions != 41 {
		t.Fatalf("after reset: %+v, %v; want released with token 41 and no hand-off", rec, err)
	}
	// The release shape, the one record a candidate takes at once (see
	// election.ReleaseShape): a lease of one second, acquire time equal to
	// renew time.
	if rec.LeaseDurationSeconds != 1 || !rec.AcquireTime.Equal(rec.RenewTime) || rec.RenewTime.IsZero() {
		t.Fatalf("after reset: lease %ds, acquired %v, renewed %v; want the release shape (1s, acquired when renewed)",
			rec.LeaseDurationSeconds, rec.AcquireTime, rec.RenewTime)
	}
	if !strings.Contains(stdout, "token 41") {
		t.Fatalf("reset said %q, want it to name the token kept", stdout)
	}
	if !strings.Contains(stdout, `waiting 1s for the lease of holder "gone_1"`) {
		t.Fatalf("reset said %q, want it to say first how long it waits, and for whom", stdout)
	}
	if code, _, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing"); code != 0 {
		t.Fatalf("reset of a released record: exit %d, stderr %q", code, stderr)
	}
}

// TestResetLeavesARenewedRecord: a holder that renews within its lease
// keeps the record; reset exits 1 saying so.
func TestResetLeavesARenewedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openElection(t, path, "billing")
	now := time.Now()
	live := backend.Record{HolderIdentity: "live_1", LeaseDurationSeconds: 2, AcquireTime: now, RenewTime: now, Transitions: 3}
	v, err := b.Create(t.Context(), live)
	if err != nil {
		t.Fatal(err)
	}
	renewed := make(chan error, 1)
	go func() { // the live holder renews while reset watches
		time.Sleep(300 * time.Millisecond)
		live.RenewTime = time.Now()
		_, err := b.Update(context.Background(), v, live)
		renewed <- err
	}()
	code, _, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing")
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(stderr, "live_1") {
		t.Fatalf("reset of a renewed record: exit %d, stderr %q; want 1 naming the holder", code, stderr)
	}
	if rec, _, _ := b.Get(t.Context()); rec.HolderIdentity != "live_1" {
		t.Fatalf("after the refused reset the record names %q, want live_1", rec.HolderIdentity)
	}
}

func TestResetBadUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--sqlite-path"},
		{[]string{"--sqlite-path", path, "extra"}, `unexpected argument "extra"`},
		{[]string{"--sqlite-path", path, "--lease-name", ""}, "--lease-name"},
		{[]string{"--bogus"}, "bogus"},
	} {
		code, _, stderr := resetCmd(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("reset %q: exit %d, stderr %q; want 2 naming %s", tc.args, code, stderr, tc.want)
		}
	}
	openElection(t, path, "other")
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path)
	if code != 0 || !strings.Contains(stdout, "no record") {
		t.Errorf("reset of an election without a record: exit %d, stdout %q, stderr %q; want 0 saying there is none", code, stdout, stderr)
	}
}

// TestResetRefusesAMissingFile: a path that names no file (a typo) is
// refused with exit 1, and nothing is created there: a reset never makes
// an election database, as sidecar status never does.
func TestResetRefusesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path)
	if code != 1 || !strings.Contains(stderr, "does not exist") || !strings.Contains(stderr, path) {
		t.Errorf("reset of a missing file: exit %d, stdout %q, stderr %q; want 1 saying %s does not exist", code, stdout, stderr, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reset of a missing file left %s behind (stat: %v)", path, err)
	}
}

// TestResetWaitsNoLongerThanTheBound: a record whose lease duration is
// beyond what the election's sidecars trust (a hand edit declaring 68
// years) is waited out only up to --max-record-lease-duration, as the
// sidecars wait it out, then reset.
func TestResetWaitsNoLongerThanTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openElection(t, path, "billing")
	now := time.Now()
	hostile := backend.Record{HolderIdentity: "edited_1", LeaseDurationSeconds: 2147483647, AcquireTime: now, RenewTime: now, Transitions: 7}
	if _, err := b.Create(t.Context(), hostile); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"reset", "--sqlite-path", path, "--lease-name", "billing", "--max-record-lease-duration", "1s"}, nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("reset of a record declaring 68 years with a bound of 1s: exit %d, stderr %q", code, errOut.String())
	}
	if rec, _, _ := b.Get(t.Context()); rec.HolderIdentity != "" || rec.Transitions != 7 {
		t.Fatalf("after reset: %+v; want released at token 7", rec)
	}
	if code, _, stderr := resetCmd(t, "--sqlite-path", path, "--max-record-lease-duration", "0s"); code != 2 || !strings.Contains(stderr, "--max-record-lease-duration") {
		t.Errorf("--max-record-lease-duration 0s: exit %d, stderr %q; want 2 naming the flag", code, stderr)
	}
}

// TestResetWaitsOutARecordEmptiedByHand: a record with no holder that is
// not the release shape (emptied by hand, under a holder that may still
// claim it and would take it back) is waited out for the election's lease
// duration, as a candidate waits it out: the holder that takes it back
// meanwhile keeps it. A record already released is left as it is.
func TestResetWaitsOutARecordEmptiedByHand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openElection(t, path, "billing")
	now := time.Now()
	emptied := backend.Record{LeaseDurationSeconds: 0, AcquireTime: now.Add(-time.Minute), RenewTime: now, Transitions: 9}
	v, err := b.Create(t.Context(), emptied)
	if err != nil {
		t.Fatal(err)
	}
	takenBack := make(chan error, 1)
	go func() { // the holder, still claiming, takes its record back
		time.Sleep(300 * time.Millisecond)
		back := backend.Record{HolderIdentity: "holder_1", LeaseDurationSeconds: 2, AcquireTime: now, RenewTime: time.Now(), Transitions: 9}
		_, err := b.Update(context.Background(), v, back)
		takenBack <- err
	}()
	code, _, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing", "--lease-duration", "2s")
	if err := <-takenBack; err != nil {
		t.Fatalf("the holder could not take its emptied record back: reset wrote over it first (%v); reset: exit %d, %q", err, code, stderr)
	}
	if code != 1 || !strings.Contains(stderr, "changed while reset waited") {
		t.Fatalf("reset of an emptied record taken back: exit %d, stderr %q; want 1, the record changed", code, stderr)
	}

	released := filepath.Join(t.TempDir(), "released.db")
	r := openElection(t, released, "billing")
	rv, err := r.Create(t.Context(), election.ReleaseShape(4, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := resetCmd(t, "--sqlite-path", released, "--lease-name", "billing")
	if code != 0 || !strings.Contains(stdout, "released already at token 4") {
		t.Fatalf("reset of a released record: exit %d, %q %q; want 0, released already", code, stdout, stderr)
	}
	if _, after, _ := r.Get(t.Context()); after != rv {
		t.Fatalf("reset wrote a released record again: version %s, was %s", after, rv)
	}
}

// TestResetIfAbandonedLeavesARenewedRecord: with --if-abandoned, a record
// its holder renews while reset watches is left, and that is exit 0.
func TestResetIfAbandonedLeavesARenewedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	b := openElection(t, path, "billing")
	now := time.Now()
	live := backend.Record{HolderIdentity: "live_1", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: 3}
	v, err := b.Create(t.Context(), live)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		live.RenewTime = time.Now()
		_, _ = b.Update(context.Background(), v, live)
	}()
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing", "--if-abandoned")
	if code != 0 || !strings.Contains(stdout, "left as it is") {
		t.Fatalf("reset --if-abandoned of a renewed record: exit %d, %q %q; want 0, left as it is", code, stdout, stderr)
	}
	if rec, _, _ := b.Get(t.Context()); rec.HolderIdentity != "live_1" {
		t.Fatalf("after reset --if-abandoned the record names %q, want live_1", rec.HolderIdentity)
	}
}

// TestResetShardGroup: --shards resets a group's shard records in one
// wait: those of holders that are gone are released with their tokens,
// one released already is left, and one a live holder renews meanwhile is
// left with exit 1, naming it.
func TestResetShardGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.db")
	now := time.Now()
	records := []backend.Record{
		{HolderIdentity: "gone_1", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: 4},
		election.ReleaseShape(6, now),
		{HolderIdentity: "gone_2", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: 9},
		{HolderIdentity: "live_3", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, Transitions: 2},
	}
	stores := make([]*sqlite.Backend, len(records))
	versions := make([]backend.Version, len(records))
	for i, rec := range records {
		stores[i] = openElection(t, path, fmt.Sprintf("jobs-shard-%d", i))
		v, err := stores[i].Create(t.Context(), rec)
		if err != nil {
			t.Fatal(err)
		}
		versions[i] = v
	}
	renewed := make(chan error, 1)
	go func() { // shard 3's holder renews while reset watches
		time.Sleep(300 * time.Millisecond)
		live := records[3]
		live.RenewTime = time.Now()
		_, err := stores[3].Update(context.Background(), versions[3], live)
		renewed <- err
	}()
	began := time.Now()
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path, "--shards", "4", "--shard-group", "jobs")
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(stderr, `election "jobs-shard-3"`) || !strings.Contains(stderr, "live_3") {
		t.Fatalf("reset of a group with a live shard: exit %d, stderr %q; want 1 naming jobs-shard-3 and its holder", code, stderr)
	}
	for _, want := range []string{`"jobs-shard-0" in ` + path + `: released at token 4`, `"jobs-shard-1" in ` + path + `: released already at token 6`,
		`"jobs-shard-2" in ` + path + `: released at token 9`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("reset said %q, want %q", stdout, want)
		}
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("reset of 4 shards took %v: it waited for each in turn, not once", took)
	}
	for i, want := range []int64{4, 6, 9} {
		if rec, _, _ := stores[i].Get(t.Context()); !election.IsReleaseShape(rec) || rec.Transitions != want {
			t.Errorf("shard %d after reset: %+v; want released at token %d", i, rec, want)
		}
	}
	if rec, _, _ := stores[3].Get(t.Context()); rec.HolderIdentity != "live_3" {
		t.Errorf("shard 3 after reset names %q, want live_3", rec.HolderIdentity)
	}
	if code, _, stderr := resetCmd(t, "--sqlite-path", path, "--shard-group", "jobs"); code != 2 || !strings.Contains(stderr, "--shard-group: only with --shards") {
		t.Errorf("--shard-group without --shards: exit %d, stderr %q; want 2", code, stderr)
	}
}

// TestResetMinToken: --min-token carries a token into a store that starts
// lower. On a missing file it creates the file and the record, held by
// "reset" for --lease-duration (never released at once: a holder of a
// deleted record may still claim); a released record below it is written
// again at once, released at it; a record at or above it keeps its token.
// Bad values are usage errors.
func TestResetMinToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	code, stdout, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "billing", "--min-token", "41", "--lease-duration", "7s")
	if code != 0 {
		t.Fatalf("reset --min-token on a new file: exit %d, stderr %q", code, stderr)
	}
	b := openElection(t, path, "billing")
	rec, _, err := b.Get(t.Context())
	if err != nil || rec.HolderIdentity != "reset" || rec.Transitions != 41 || rec.LeaseDurationSeconds != 7 || election.IsReleaseShape(rec) {
		t.Fatalf("after reset --min-token 41 of a new file: %+v, %v; want held by reset for 7s at token 41", rec, err)
	}
	if !strings.Contains(stdout, "created at token 41") {
		t.Fatalf("reset said %q, want it to say it created the record at token 41", stdout)
	}

	released := openElection(t, path, "orders")
	if _, err := released.Create(t.Context(), election.ReleaseShape(3, time.Now())); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if code, _, stderr := resetCmd(t, "--sqlite-path", path, "--lease-name", "orders", "--min-token", "41"); code != 0 {
		t.Fatalf("reset --min-token of a released record: exit %d, stderr %q", code, stderr)
	}
	if rec, _, err := released.Get(t.Context()); err != nil || !election.IsReleaseShape(rec) || rec.Transitions != 41 {
		t.Fatalf("after reset --min-token 41 of a record released at 3: %+v, %v; want released at 41", rec, err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("reset of a released record took %v: it has no holder to wait out", took)
	}
	if code, stdout, _ := resetCmd(t, "--sqlite-path", path, "--lease-name", "orders", "--min-token", "20"); code != 0 || !strings.Contains(stdout, "released already at token 41") {
		t.Fatalf("reset --min-token 20 of a record released at 41: exit %d, %q; want it left at 41", code, stdout)
	}

	for _, bad := range [][]string{
		{"--sqlite-path", path, "--min-token", "-1"},
		{"--sqlite-path", path, "--min-token", "5", "--if-abandoned"},
		{"--backend", "lease", "--min-token", "2147483647"},
	} {
		if code, _, stderr := resetCmd(t, bad...); code != 2 || !strings.Contains(stderr, "--min-token") {
			t.Errorf("reset %v: exit %d, stderr %q; want 2 naming --min-token", bad, code, stderr)
		}
	}
}
