package statusview

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// Election is one election's record as the store holds it.
type Election struct {
	// Namespace is the Lease's namespace; "" for SQLite.
	Namespace, Name string
	Record          backend.Record
	Version         backend.Version
}

// Key names the election uniquely in its store.
func (e Election) Key() string { return e.Namespace + "/" + e.Name }

// Sort sorts els by namespace and name.
func Sort(els []Election) {
	sort.Slice(els, func(i, j int) bool { return els[i].Key() < els[j].Key() })
}

// The states of an election's row.
const (
	StateHeld     = "held"     // a holder, renewed within its lease by the observer's clock
	StatePending  = "pending"  // a holder that created the record and claims it only from ClaimFrom, its first renewal
	StateMember   = "member"   // a shard group's member record, renewed within its lease
	StateStale    = "stale"    // a holder, not renewed within its lease by the observer's clock
	StateReleased = "released" // no holder: the next candidate may take it at once
	StateDeleted  = "deleted"  // the record is gone (--watch only)
)

// Row is one election as sidecar status shows it; its JSON is the -o
// json output.
type Row struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Holder is "" when the lease was released.
	Holder string `json:"holder"`
	// Token is the fencing token of the current (or last) term.
	Token                int64      `json:"token"`
	AcquireTime          *time.Time `json:"acquireTime"`
	RenewTime            *time.Time `json:"renewTime"`
	LeaseDurationSeconds int32      `json:"leaseDurationSeconds"`
	// TermAgeSeconds is the time since AcquireTime, by the observer's
	// clock; null when released or unknown.
	TermAgeSeconds *float64 `json:"termAgeSeconds"`
	// SinceRenewalSeconds is the time since RenewTime, by the observer's
	// clock (negative when the holder's clock is ahead); null if unknown.
	SinceRenewalSeconds *float64 `json:"sinceRenewalSeconds"`
	// Handoff is the record's hand-off marker; null when there is none.
	Handoff *Handoff `json:"handoff"`
	// State is held, pending, member, stale, released or deleted; Stale
	// is State == stale.
	State string `json:"state"`
	Stale bool   `json:"stale"`
	// ClaimFrom is, while State is pending, when the holder's claim
	// starts: a lease duration after it created the record, by the
	// holder's clock (AcquireTime); null otherwise.
	ClaimFrom *time.Time `json:"claimFrom"`
	// Version is the store's version of the record (a Lease's
	// resourceVersion).
	Version string `json:"version"`
	// ObservedAt is the observer's clock when the row was computed.
	ObservedAt time.Time `json:"observedAt"`
}

// Handoff is a hand-off marker as shown. Pending is true while it
// belongs to the current term (package election ignores a marker whose
// token or leader no longer matches the record: a leftover).
type Handoff struct {
	Phase   string `json:"phase"`
	From    string `json:"from"`
	To      string `json:"to"`
	Token   int64  `json:"token"`
	Pending bool   `json:"pending"`
}

// RowOf is e as seen at now.
func RowOf(e Election, now time.Time) Row {
	r := Row{
		Namespace:            e.Namespace,
		Name:                 e.Name,
		Holder:               e.Record.HolderIdentity,
		Token:                e.Record.Transitions,
		LeaseDurationSeconds: e.Record.LeaseDurationSeconds,
		Version:              string(e.Version),
		ObservedAt:           now,
	}
	if t := e.Record.AcquireTime; !t.IsZero() {
		r.AcquireTime = &t
		if r.Holder != "" {
			r.TermAgeSeconds = seconds(now.Sub(t))
		}
	}
	if t := e.Record.RenewTime; !t.IsZero() {
		r.RenewTime = &t
		r.SinceRenewalSeconds = seconds(now.Sub(t))
	}
	if h := e.Record.Handoff; !h.IsZero() {
		r.Handoff = &Handoff{Phase: string(h.Phase), From: h.From, To: h.To, Token: h.Token, Pending: handoffPending(e.Record)}
	}
	lease := time.Duration(e.Record.LeaseDurationSeconds) * time.Second
	switch {
	case r.Holder == "":
		r.State = StateReleased
	case e.Record.RenewTime.IsZero() && !e.Record.AcquireTime.IsZero() && now.Before(e.Record.AcquireTime.Add(lease)):
		// A record created without a renewal: its holder claims it
		// only once it has seen it unchanged for a lease duration, in
		// case the holder of a deleted one still claims (package
		// election, "A missing record").
		claim := e.Record.AcquireTime.Add(lease)
		r.State, r.ClaimFrom = StatePending, &claim
	case e.Record.RenewTime.IsZero() || now.Sub(e.Record.RenewTime) > lease:
		r.State, r.Stale = StateStale, true
	case isMemberRecord(e.Name, r.Holder):
		r.State = StateMember
	default:
		r.State = StateHeld
	}
	return r
}

// isMemberRecord reports whether a record named name that names holder is
// a shard group's member record: the record a replica in shard mode
// renews to say it is in its group, named after the group and itself
// (shardgroup.MemberRecord), not an election. Its token is always 0 and
// its term is how long the replica has been in the group.
func isMemberRecord(name, holder string) bool {
	suffix := shardgroup.MemberRecord("", holder)
	return holder != "" && len(name) > len(suffix) && strings.HasSuffix(name, suffix)
}

// handoffPending reports whether rec's marker belongs to its term: an
// offer or an accept by the holder at its token, a transfer to the
// holder at its token that the holder has not yet renewed, or a release
// at its token left to the stopped leader's replacement.
func handoffPending(rec backend.Record) bool {
	h := rec.Handoff
	switch h.Phase {
	case backend.HandoffOffer, backend.HandoffAccept:
		return h.From == rec.HolderIdentity && h.Token == rec.Transitions
	case backend.HandoffTransfer:
		return h.To == rec.HolderIdentity && h.Token == rec.Transitions
	case backend.HandoffReserve:
		return rec.HolderIdentity == "" && h.Token == rec.Transitions
	}
	return false
}

func seconds(d time.Duration) *float64 {
	s := d.Round(time.Millisecond).Seconds()
	return &s
}

// deletedRow is the row --watch prints for an election whose record is
// gone.
func deletedRow(e Election, now time.Time) Row {
	r := RowOf(e, now)
	r.State, r.Stale = StateDeleted, false
	return r
}

// changeKey is what --watch compares to decide that a row changed: not the
// times a renewal moves, only what an operator acts on.
func (r Row) changeKey() string {
	var h string
	if r.Handoff != nil {
		h = fmt.Sprintf("%+v", *r.Handoff)
	}
	return fmt.Sprintf("%s|%d|%d|%s|%s", r.Holder, r.Token, r.LeaseDurationSeconds, r.State, h)
}

// StaleNote is what status prints on stderr when a row is stale: the
// verdict rests on two clocks.
const StaleNote = "stale: no renewal within the lease duration by this machine's clock; a display hint only: " +
	"the election never compares clocks across machines (a standby takes over only after it saw the record unchanged " +
	"for a lease on its own clock), so clock skew between this machine and the holder's also shows as stale"
