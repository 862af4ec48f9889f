package election

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// counting counts a handle's store requests. It embeds the handle as a
// backend.Backend alone, so it keeps no snapshots, as SQLite; snapshotting
// gives it the memory backend's, as a Lease's watch keeps them.
type counting struct {
	backend.Backend
	gets, creates, updates atomic.Int64
}

func (c *counting) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx)
}

func (c *counting) Create(ctx context.Context, r backend.Record) (backend.Version, error) {
	c.creates.Add(1)
	return c.Backend.Create(ctx, r)
}

func (c *counting) CreateFirst(ctx context.Context, r backend.Record) (backend.Version, error) {
	c.creates.Add(1)
	return c.Backend.(backend.FirstCreator).CreateFirst(ctx, r)
}

func (c *counting) Update(ctx context.Context, v backend.Version, r backend.Record) (backend.Version, error) {
	c.updates.Add(1)
	return c.Backend.Update(ctx, v, r)
}

func (c *counting) requests() int64 { return c.gets.Load() + c.creates.Load() + c.updates.Load() }

// snapshotting is a counted memory handle with the memory backend's
// snapshots: reading one is no request.
type snapshotting struct{ *counting }

func (s snapshotting) Snapshot() (backend.Record, backend.Version, bool) {
	return s.counting.Backend.(backend.Snapshotter).Snapshot()
}

// silent is a handle whose Watch never signals: a watch that is broken
// without saying so. Its snapshots are the memory backend's, kept by a
// Watch whose signals are dropped.
type silent struct{ *memory.Backend }

func (s silent) Watch(ctx context.Context) <-chan struct{} {
	s.Backend.Watch(ctx)
	ch := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// A leader whose backend keeps a snapshot (a Lease) sends one request per
// renewal: its own writes, signalled back, show the version it wrote.
func TestLeaderRenewsWithOneRequestPerRenewal(t *testing.T) {
	testLeaderRequests(t, true, 0)
}

// Without a snapshot (SQLite), every change signal costs the leader one
// read, its own renewals' included: a renewal and a read every 5s.
func TestLeaderWithoutSnapshotsReadsOncePerSignal(t *testing.T) {
	testLeaderRequests(t, false, 12)
}

// testLeaderRequests counts a leader's reads and updates over a minute of
// renewals every 5s: 12 updates, and wantGets reads.
func testLeaderRequests(t *testing.T, snapshots bool, wantGets int64) {
	synctest.Test(t, func(t *testing.T) {
		b := &counting{Backend: memory.NewStore().Open("loop")}
		var handle backend.Backend = b
		if snapshots {
			handle = snapshotting{b}
		}
		a := start(t, handle, "a", true)
		time.Sleep(time.Second)
		if !a.Status().Leader {
			t.Fatal("a does not lead")
		}
		gets, updates := b.gets.Load(), b.updates.Load()
		time.Sleep(time.Minute)
		if g, u := b.gets.Load()-gets, b.updates.Load()-updates; g != wantGets || u != 12 {
			t.Fatalf("a minute of renewals every 5s cost %d reads and %d updates, want %d and 12", g, u, wantGets)
		}
	})
}

// leaderAndWatchingStandby starts a leader a on a memory store and, a
// second later, a standby b whose handle keeps snapshots and counts its
// requests (standby), and lets them settle for ten seconds. Inside a
// synctest bubble.
func leaderAndWatchingStandby(t *testing.T) (a, b *running, standby *counting) {
	store := memory.NewStore()
	a = start(t, store.Open("loop"), "a", true)
	time.Sleep(time.Second)
	standby = &counting{Backend: store.Open("loop")}
	b = start(t, snapshotting{standby}, "b", true)
	time.Sleep(10 * time.Second)
	return a, b, standby
}

func TestIdleStandbyWithSnapshotsSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, standby := leaderAndWatchingStandby(t)
		before := standby.requests()
		time.Sleep(5 * time.Minute)
		if n := standby.requests() - before; n != 0 {
			t.Fatalf("an idle standby sent %d requests in 5 minutes, want 0", n)
		}
		if soleLeader(t, a, b) != a || b.Status().Holder != "a" {
			t.Fatalf("b's view: %+v", b.Status())
		}

		// A release still reaches it at once.
		a.stop()
		synctest.Wait()
		if s := b.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("after the release: %+v, want b leading with token 2", s)
		}
	})
}

func TestStandbyWithSnapshotsTakesOverAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", false)
		time.Sleep(time.Second)
		b := start(t, store.Open("loop"), "b", false)
		time.Sleep(30 * time.Second)
		crashAndExpectTakeoverAtExpiry(t, a, b)
	})
}

func TestStandbyWhoseWatchIsSilentStillTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", false)
		time.Sleep(time.Second)
		b := start(t, silent{store.Open("loop")}, "b", false)
		time.Sleep(30 * time.Second)
		if b.Status().Leader {
			t.Fatal("b leads beside a live leader")
		}
		crashed := time.Now()
		a.stop()
		for !b.Status().Leader {
			time.Sleep(10 * time.Millisecond)
			if time.Since(crashed) > DefaultLeaseDuration+2*DefaultRetryPeriod {
				t.Fatalf("b has not taken over %v after the crash: its reads must stand in for the silent watch", time.Since(crashed))
			}
		}
	})
}

// A standby that sees a release in a snapshot acquires with one request,
// the write, made on the snapshot's version: no read before it.
func TestStandbyAcquiresAReleaseSeenInASnapshotWithoutReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, standby := leaderAndWatchingStandby(t)
		gets, updates := standby.gets.Load(), standby.updates.Load()
		a.stop()
		synctest.Wait()
		if s := b.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("after the release: %+v, want b leading with token 2", s)
		}
		if g, u := standby.gets.Load()-gets, standby.updates.Load()-updates; g != 0 || u != 1 {
			t.Fatalf("the take-over cost %d reads and %d updates, want 0 and 1", g, u)
		}
	})
}

// frozen is a counted handle whose snapshot is whatever the test set last:
// a watch that lags the store.
type frozen struct {
	*counting
	rec     backend.Record
	version backend.Version
}

func (f *frozen) Snapshot() (backend.Record, backend.Version, bool) {
	return f.rec, f.version, f.version != ""
}

// A snapshot of a release that the store has moved past (another
// candidate acquired since) costs the standby a conflict and no more: it
// does not lead, and its next attempt reads the record and sees the new
// holder.
func TestStandbyAcquiringOnAStaleSnapshotLosesTheRaceThenReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", true)
		time.Sleep(time.Second)
		a.stop()
		peek := store.Open("loop")
		released, atRelease, err := peek.Get(t.Context())
		if err != nil || released.HolderIdentity != "" {
			t.Fatalf("after a's release: %+v, %v; want no holder", released, err)
		}
		c := start(t, store.Open("loop"), "c", true)
		time.Sleep(time.Second)
		if s := c.Status(); !s.Leader || s.Token != 2 {
			t.Fatalf("c: %+v, want leading with token 2", s)
		}

		h := &frozen{counting: &counting{Backend: store.Open("loop")}, rec: released, version: atRelease}
		b, err := New(Config{Backend: h, Identity: "b", Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		d := b.Driver()
		if attemptNow, _, _ := d.Signal(); !attemptNow {
			t.Fatal("a snapshot of a released record did not make an attempt due at once")
		}
		d.Attempt(t.Context())
		if s := b.Status(); s.Leader {
			t.Fatalf("b leads on a stale snapshot: %+v", s)
		}
		if g, u := h.gets.Load(), h.updates.Load(); g != 0 || u != 1 {
			t.Fatalf("the attempt on the snapshot cost %d reads and %d updates, want 0 and 1 (refused)", g, u)
		}
		if rec, _, _ := peek.Get(t.Context()); rec.HolderIdentity != "c" || rec.Transitions != 2 {
			t.Fatalf("the store after b's attempt: %+v, want c's record at token 2", rec)
		}

		d.Attempt(t.Context())
		if g := h.gets.Load(); g != 1 {
			t.Fatalf("the attempt after the conflict made %d reads, want 1", g)
		}
		if s := b.Status(); s.Leader || s.Holder != "c" {
			t.Fatalf("b after reading: %+v, want a standby of c", s)
		}
		if soleLeader(t, c) != c {
			t.Fatal("c no longer leads")
		}
	})
}

// A standby that waits out a crashed leader's lease on its watch's
// snapshot takes over with one request, the write, made on the snapshot's
// version: no read when the lease runs out.
func TestStandbyTakesOverAtExpiryOnTheSnapshotWithoutReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		a := start(t, store.Open("loop"), "a", false)
		time.Sleep(time.Second)
		standby := &counting{Backend: store.Open("loop")}
		b := start(t, snapshotting{standby}, "b", false)
		time.Sleep(30 * time.Second)
		gets, updates := standby.gets.Load(), standby.updates.Load()
		crashAndExpectTakeoverAtExpiry(t, a, b)
		if g, u := standby.gets.Load()-gets, standby.updates.Load()-updates; g != 0 || u != 1 {
			t.Fatalf("the take-over at expiry cost %d reads and %d updates, want 0 and 1", g, u)
		}
	})
}

// A standby whose watch has not shown the leader's renewals (its snapshot
// lags the store) writes its acquire at the snapshot's expiry on a
// version the store has moved past: a conflict, and no more. It does not
// lead, its next attempt reads the record, and it waits on the renewal it
// finds.
func TestStandbyExpiringAStaleSnapshotLosesTheRaceThenReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, h, peek := leaderAndFrozenStandby(t)
		atSeen := h.version
		d := b.Driver()
		attemptNow, wait, _ := d.Signal()
		if attemptNow || wait != DefaultLeaseDuration {
			t.Fatalf("a snapshot of a's fresh record: attempt now %v, wait %v; want a wait of the lease duration", attemptNow, wait)
		}
		time.Sleep(wait) // a renews meanwhile; the snapshot does not show it
		if _, now, _ := peek.Get(t.Context()); now == atSeen {
			t.Fatal("a has not renewed in a lease duration")
		}
		d.Attempt(t.Context())
		if s := b.Status(); s.Leader {
			t.Fatalf("b leads on a stale snapshot: %+v", s)
		}
		if g, u := h.gets.Load(), h.updates.Load(); g != 0 || u != 1 {
			t.Fatalf("the attempt at the snapshot's expiry cost %d reads and %d updates, want 0 and 1 (refused)", g, u)
		}

		next := d.Attempt(t.Context())
		if g, u := h.gets.Load(), h.updates.Load(); g != 1 || u != 1 {
			t.Fatalf("the attempt after the conflict made %d reads and %d updates in all, want 1 and 1", g, u)
		}
		if s := b.Status(); s.Leader || s.Holder != "a" {
			t.Fatalf("b after reading: %+v, want a standby of a", s)
		}
		if next <= 0 {
			t.Fatalf("b's next attempt is due in %v, want a wait on the renewal it read", next)
		}
		if soleLeader(t, a) != a {
			t.Fatal("a no longer leads")
		}
	})
}

// A standby whose wait ends on a snapshot of another version than the one
// it waited on reads the record, and the snapshot's token still counts:
// the term it starts on a record whose token went down (edited by hand)
// starts above the snapshot's token, not only above what it saw before.
func TestTokenOfASnapshotLeftForAReadStillCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, h, peek := leaderAndFrozenStandby(t)
		if h.rec.Transitions != 1 {
			t.Fatalf("a's record: %+v, want token 1", h.rec)
		}
		d := b.Driver()
		_, wait, _ := d.Signal()
		a.stop() // a crash: no release
		// What the watch shows when the wait ends: a later term, token 7.
		h.rec = backend.Record{HolderIdentity: "c", LeaseDurationSeconds: 15, Transitions: 7}
		h.version = "a later version"
		// What the store holds: released, its token edited down to 0.
		_, now, err := peek.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := peek.Update(t.Context(), now, ReleaseShape(0, time.Now())); err != nil {
			t.Fatal(err)
		}
		time.Sleep(wait)
		d.Attempt(t.Context())
		if s := b.Status(); !s.Leader || s.Token != 8 {
			t.Fatalf("b after its attempt: %+v, want leading with token 8, above the snapshot's 7", s)
		}
	})
}

// leaderAndFrozenStandby starts a leader a on a memory store and, a second
// later, a standby b driven by hand (b.Driver) whose snapshot stays a's
// record as it was then (h) until the test sets another; peek reads the
// store. Inside a synctest bubble.
func leaderAndFrozenStandby(t *testing.T) (a *running, b *Elector, h *frozen, peek backend.Backend) {
	t.Helper()
	store := memory.NewStore()
	a = start(t, store.Open("loop"), "a", false)
	time.Sleep(time.Second)
	peek = store.Open("loop")
	seen, atSeen, err := peek.Get(t.Context())
	if err != nil || seen.HolderIdentity != "a" {
		t.Fatalf("a's record: %+v, %v", seen, err)
	}
	h = &frozen{counting: &counting{Backend: store.Open("loop")}, rec: seen, version: atSeen}
	b, err = New(Config{Backend: h, Identity: "b", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return a, b, h, peek
}

// A token that went back is reported once per lower term, however the
// standby learns of the record's versions: from snapshots (a Lease's
// watch, where a standby does not read while the holder renews) or from
// reads (SQLite). The standby sees token 5; the record is replaced by one
// at token 1 (a client-go candidate that recreated the Lease at 0, then
// took it) and renewed 30 times.
func TestTokenRegressedIsReportedOnceHoweverVersionsAreLearnt(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		name := map[bool]string{true: "with snapshots (Lease)", false: "without snapshots (SQLite)"}[snapshots]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.NewStore()
				peek := store.Open("loop")
				put := func(rec backend.Record) {
					t.Helper()
					_, v, err := peek.Get(t.Context())
					if err == nil {
						_, err = peek.Update(t.Context(), v, rec)
					} else {
						_, err = peek.Create(t.Context(), rec)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				put(backend.Record{HolderIdentity: "x", LeaseDurationSeconds: 15, Transitions: 5})
				handle := &counting{Backend: store.Open("loop")}
				var b backend.Backend = handle
				if snapshots {
					handle.Backend.Watch(t.Context())
					b = snapshotting{handle}
				}
				obs := &recordingObserver{}
				e, err := New(Config{Backend: b, Identity: "b", Logger: quietLogger(), Observer: obs})
				if err != nil {
					t.Fatal(err)
				}
				d := e.Driver()
				d.Attempt(t.Context())
				if s := e.Status(); s.Holder != "x" {
					t.Fatalf("b after its first attempt: %+v, want a standby seeing x", s)
				}
				gets := handle.gets.Load()
				for i := range 31 {
					put(backend.Record{HolderIdentity: "c", LeaseDurationSeconds: 15, Transitions: 1,
						RenewTime: epoch.Add(time.Duration(i) * time.Second)})
					time.Sleep(time.Second)
					if attemptNow, _, _ := d.Signal(); attemptNow {
						d.Attempt(t.Context())
					}
				}
				if snapshots && handle.gets.Load() != gets {
					t.Fatalf("b read the record %d times: the versions were meant to come from snapshots", handle.gets.Load()-gets)
				}
				const report = "token-regressed seen=1 highest=5"
				if n := obs.count(report); n != 1 {
					t.Fatalf("%q told %d times for 31 versions of one lower term, want 1; told %q", report, n, obs.events)
				}
				if s := e.Status(); s.Leader || s.Holder != "c" {
					t.Fatalf("b at the end: %+v, want a standby seeing c", s)
				}
			})
		})
	}
}
