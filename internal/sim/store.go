package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// store is the one record, with linearizable compare-and-swap: every
// operation takes effect at one instant of true time.
type store struct {
	rec     backend.Record
	present bool
	version int64
	// created is set by the first write; provesNeverCreated makes a Get
	// of a record never created say so (backend.ErrNeverCreated), as the
	// SQLite and memory stores do, where a Lease does not.
	created, provesNeverCreated bool
	// past keeps the states before the last writes (at most keptStates),
	// newest last, when the schedule has lossy failovers: what a promoted
	// standby or a restored backup may hold (storefaults.go).
	past      []storedState
	keepsPast bool
	downUntil time.Duration // restarting or failing over until then: every request fails
	// issued is the highest version issued; writes counts the writes
	// (and deletions).
	issued, writes int64
	// reissues makes a failover hand out again the versions it lost, as
	// a store that numbers versions from the restored state does (an etcd
	// backup restored without --bump-revision): otherwise versions go on
	// above every one issued (restored with it).
	reissues bool
	// armed are the down times of the failovers waiting for the next
	// write that starts a term (strikeAfterAcquire).
	armed []time.Duration
}

// storedState is the record as one write left it.
type storedState struct {
	rec              backend.Record
	present, created bool
	version          int64
}

// keptStates is how many states before the current one a store that may
// fail over keeps: a failover loses at most that many writes.
const keptStates = 8

// remember keeps the state about to be replaced, if the store may fail
// over.
func (s *store) remember() {
	if !s.keepsPast {
		return
	}
	if len(s.past) == keptStates {
		s.past = append(s.past[:0], s.past[1:]...)
	}
	s.past = append(s.past, storedState{s.rec, s.present, s.created, s.version})
}

func (s *store) versionString() backend.Version {
	if !s.present {
		return ""
	}
	return backend.Version(strconv.FormatInt(s.version, 10))
}

// apply carries out one request at this instant.
func (s *store) apply(c *call) result {
	switch c.op {
	case opGet:
		if !s.present && !s.created && s.provesNeverCreated {
			return result{err: fmt.Errorf("%w (%w)", backend.ErrNotFound, backend.ErrNeverCreated)}
		}
		if !s.present {
			return result{err: backend.ErrNotFound}
		}
		return result{rec: s.rec, version: s.versionString()}
	case opCreate, opCreateFirst:
		if s.present || c.op == opCreateFirst && s.created {
			return result{err: backend.ErrAlreadyExists}
		}
		s.write(c.rec)
		return result{version: s.versionString()}
	default: // opUpdate
		switch {
		case !s.present:
			return result{err: backend.ErrNotFound}
		case s.versionString() != c.prev:
			return result{err: backend.ErrConflict}
		}
		s.write(c.rec)
		return result{version: s.versionString()}
	}
}

func (s *store) write(rec backend.Record) {
	s.remember()
	s.rec, s.present, s.created = rec, true, true
	s.nextVersion()
}

// nextVersion gives the record a version never issued before: one above
// the last, or above every one issued before a failover that set the
// version back.
func (s *store) nextVersion() {
	s.version = max(s.version, s.issued) + 1
	s.issued = s.version
	s.writes++
}

type op int

const (
	opGet op = iota
	opCreate
	opUpdate
	opCreateFirst
)

func (o op) String() string { return [...]string{"Get", "Create", "Update", "CreateFirst"}[o] }

// call is one request from a candidate, parked until the world answers it.
type call struct {
	ctx  context.Context // ends the request in the candidate when it ends (expire)
	from *candidate
	// applied is set once the request took effect at the store; severed
	// once a restart or failover cut it off before it did (it then never
	// does).
	applied, severed bool
	op               op
	prev             backend.Version
	rec              backend.Record
	reply            chan result
}

type result struct {
	rec     backend.Record
	version backend.Version
	err     error
}

func (r result) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("%s v%s", describe(r.rec, true), r.version)
}

// handle is a candidate's backend.Backend: each request is handed to the
// world, which answers it in virtual time, and the candidate's goroutine
// waits meanwhile. With snapshots it is also a backend.Snapshotter that
// returns what the candidate's (delayed, lossy) watch delivered last.
type handle struct{ c *candidate }

func (h handle) do(ctx context.Context, req *call) result {
	c := h.c
	if c.gate != nil && req.op != opGet {
		if err := c.gate(req.rec); err != nil {
			return result{err: err}
		}
	}
	if _, ok := c.seenBeforeWrite[req.rec.Transitions]; req.op != opGet && !ok {
		c.seenBeforeWrite[req.rec.Transitions] = c.maxSeen
	}
	c.w.startedFor(c, req)
	req.ctx = ctx
	req.reply = make(chan result)
	c.calls <- req
	r := <-req.reply
	switch {
	case r.err == nil && req.op == opGet:
		c.saw(r.rec)
	case r.err == nil:
		c.saw(req.rec)
	}
	return r
}

func (h handle) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	r := h.do(ctx, &call{op: opGet})
	return r.rec, r.version, r.err
}

func (h handle) Create(ctx context.Context, rec backend.Record) (backend.Version, error) {
	r := h.do(ctx, &call{op: opCreate, rec: rec})
	return r.version, r.err
}

func (h handle) createFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	r := h.do(ctx, &call{op: opCreateFirst, rec: rec})
	return r.version, r.err
}

func (h handle) Update(ctx context.Context, prev backend.Version, rec backend.Record) (backend.Version, error) {
	r := h.do(ctx, &call{op: opUpdate, prev: prev, rec: rec})
	return r.version, r.err
}

// Watch is not used: the world delivers change signals through the
// election.Driver.
func (h handle) Watch(ctx context.Context) <-chan struct{} { return nil }
func (h handle) Describe() string                          { return "sim#" + h.c.id }
func (h handle) Close() error                              { return nil }

type snapshotHandle struct{ handle }

// firstHandle and firstSnapshotHandle are the handles of a store that
// proves a record never created: backend.FirstCreators.
type (
	firstHandle         struct{ handle }
	firstSnapshotHandle struct{ snapshotHandle }
)

func (h firstHandle) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return h.createFirst(ctx, rec)
}

func (h firstSnapshotHandle) CreateFirst(ctx context.Context, rec backend.Record) (backend.Version, error) {
	return h.createFirst(ctx, rec)
}

func (h snapshotHandle) Snapshot() (backend.Record, backend.Version, bool) {
	s := h.c.snapshot
	if s.present {
		h.c.saw(s.rec)
	}
	return s.rec, s.versionString(), s.present
}

func describe(rec backend.Record, present bool) string {
	if !present {
		return "(missing)"
	}
	s := fmt.Sprintf("holder=%q token=%d lease=%ds", rec.HolderIdentity, rec.Transitions, rec.LeaseDurationSeconds)
	if h := rec.Handoff; !h.IsZero() {
		s += fmt.Sprintf(" %s from=%q to=%q at=%d", h.Phase, h.From, h.To, h.Token)
	}
	return s
}

// contest is one record and the invariants of the candidates that contend
// for it: the one election of a schedule, or one shard of a group.
type contest struct {
	shard int
	store store
	check checker
	// cands are the candidates ever started for it, in order.
	cands []*candidate
	// edited is set once the record was deleted or edited by hand; until
	// then every new holder's token is exactly one above the last.
	edited bool
	// touched is set whenever something may change what its checker
	// reads or keeps: a candidate's elector runs (an activity, a change
	// signal, a rejoin), a candidate starts, a late write arrives, the
	// record is deleted or edited by hand. In a shard group the checker
	// looks only at the shards touched since it last looked, which gives
	// the verdicts of looking at every shard after every event: untouched,
	// a shard's claims can only lapse (no elector code ran, and a claim
	// lapses with time alone), so its leader is still the one the checker
	// saw last or none; its term is known, so no check of a new term
	// applies; and its guard has seen nothing since that leader's last
	// write, so writing again is accepted or refused as it was, changing
	// nothing. (What the checker keeps for the liveness of a lone
	// election, which is checked at every event, a group does not use.)
	touched bool
	// suffixText is suffix, once made.
	suffixText string
	// changedAt is when the record last changed (w.changed).
	changedAt time.Duration
}

// suffix names the contest's shard in the trace; "" for a lone election.
func (el *contest) suffix() string {
	if el.shard >= 0 && el.suffixText == "" {
		el.suffixText = fmt.Sprintf(" [shard %d]", el.shard)
	}
	return el.suffixText
}

// checkTokenStep checks a candidate's write of rec over prev (present or
// not) on a record never deleted or edited by hand: a write that names a
// new holder carries the token one above the record it replaced (1 for
// the first); any other write keeps the token, or raises it by one (a new
// term of the same holder, after its claim lapsed).
func (el *contest) checkTokenStep(w *world, c *candidate, prev backend.Record, present bool, rec backend.Record) {
	if el.edited {
		return
	}
	newHolder := rec.HolderIdentity != "" && (!present || rec.HolderIdentity != prev.HolderIdentity)
	switch t := rec.Transitions; {
	case newHolder && t == prev.Transitions+1:
	case !newHolder && (t == prev.Transitions || t == prev.Transitions+1 && rec.HolderIdentity != ""):
	default:
		el.check.violate(w, el, fmt.Sprintf("%s wrote token %d over %s", c.id, t, describe(prev, present)))
	}
}
