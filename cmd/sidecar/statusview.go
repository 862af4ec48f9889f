package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

// What sidecar status shows of an election, and how: a row per election
// computed from its record and the observer's clock (electionRow), printed
// as a table, a wide table or JSON.
//
// The ages and the stale verdict compare the record's times, written by
// the holder's clock, with this machine's clock: a display hint only. The
// election never does that (a standby judges expiry by how long it has
// seen the record unchanged, on its own monotonic clock), so clock skew
// between this machine and the holder's shows here as a renewal that is
// too old (stale) or in the future (a negative age), and nowhere else.

// storedElection is one election's record as the store holds it.
type storedElection struct {
	// namespace is the Lease's namespace; "" for SQLite.
	namespace, name string
	rec             backend.Record
	version         backend.Version
}

// key names the election uniquely in its store.
func (e storedElection) key() string { return e.namespace + "/" + e.name }

// The states of an election's row.
const (
	stateHeld     = "held"     // a holder, renewed within its lease by the observer's clock
	stateMember   = "member"   // a shard group's member record, renewed within its lease
	stateStale    = "stale"    // a holder, not renewed within its lease by the observer's clock
	stateReleased = "released" // no holder: the next candidate may take it at once
	stateDeleted  = "deleted"  // the record is gone (--watch only)
)

// electionRow is one election as sidecar status shows it; its JSON is the
// -o json output.
type electionRow struct {
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
	Handoff *handoffRow `json:"handoff"`
	// State is held, member, stale, released or deleted; Stale is State
	// == stale.
	State string `json:"state"`
	Stale bool   `json:"stale"`
	// Version is the store's version of the record (a Lease's
	// resourceVersion).
	Version string `json:"version"`
	// ObservedAt is the observer's clock when the row was computed.
	ObservedAt time.Time `json:"observedAt"`
}

// handoffRow is a hand-off marker as shown. Pending is true while it
// belongs to the current term (package election ignores a marker whose
// token or leader no longer matches the record: a leftover).
type handoffRow struct {
	Phase   string `json:"phase"`
	From    string `json:"from"`
	To      string `json:"to"`
	Token   int64  `json:"token"`
	Pending bool   `json:"pending"`
}

// rowOf is e as seen at now.
func rowOf(e storedElection, now time.Time) electionRow {
	r := electionRow{
		Namespace:            e.namespace,
		Name:                 e.name,
		Holder:               e.rec.HolderIdentity,
		Token:                e.rec.Transitions,
		LeaseDurationSeconds: e.rec.LeaseDurationSeconds,
		Version:              string(e.version),
		ObservedAt:           now,
	}
	if t := e.rec.AcquireTime; !t.IsZero() {
		r.AcquireTime = &t
		if r.Holder != "" {
			r.TermAgeSeconds = seconds(now.Sub(t))
		}
	}
	if t := e.rec.RenewTime; !t.IsZero() {
		r.RenewTime = &t
		r.SinceRenewalSeconds = seconds(now.Sub(t))
	}
	if h := e.rec.Handoff; !h.IsZero() {
		r.Handoff = &handoffRow{Phase: string(h.Phase), From: h.From, To: h.To, Token: h.Token, Pending: handoffPending(e.rec)}
	}
	lease := time.Duration(e.rec.LeaseDurationSeconds) * time.Second
	switch {
	case r.Holder == "":
		r.State = stateReleased
	case e.rec.RenewTime.IsZero() || now.Sub(e.rec.RenewTime) > lease:
		r.State, r.Stale = stateStale, true
	case isMemberRecord(e.name, r.Holder):
		r.State = stateMember
	default:
		r.State = stateHeld
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
// offer or an accept by the holder at its token, or a transfer to the
// holder at its token that the holder has not yet renewed.
func handoffPending(rec backend.Record) bool {
	h := rec.Handoff
	switch h.Phase {
	case backend.HandoffOffer, backend.HandoffAccept:
		return h.From == rec.HolderIdentity && h.Token == rec.Transitions
	case backend.HandoffTransfer:
		return h.To == rec.HolderIdentity && h.Token == rec.Transitions
	}
	return false
}

func seconds(d time.Duration) *float64 {
	s := d.Round(time.Millisecond).Seconds()
	return &s
}

// deletedRow is the row --watch prints for an election whose record is
// gone.
func deletedRow(e storedElection, now time.Time) electionRow {
	r := rowOf(e, now)
	r.State, r.Stale = stateDeleted, false
	return r
}

// changeKey is what --watch compares to decide that a row changed: not the
// times a renewal moves, only what an operator acts on.
func (r electionRow) changeKey() string {
	var h string
	if r.Handoff != nil {
		h = fmt.Sprintf("%+v", *r.Handoff)
	}
	return fmt.Sprintf("%s|%d|%d|%s|%s", r.Holder, r.Token, r.LeaseDurationSeconds, r.State, h)
}

// tablePrinter prints rows as kubectl prints objects: a header, then a
// line per row, the columns aligned among the rows printed together.
type tablePrinter struct {
	wide, namespaces bool
}

func (p tablePrinter) header() []string {
	h := []string{"NAME", "HOLDER", "TOKEN", "TERM", "RENEWED", "LEASE", "HANDOFF", "STATE"}
	if p.namespaces {
		h = append([]string{"NAMESPACE"}, h...)
	}
	if p.wide {
		h = append(h, "ACQUIRE-TIME", "RENEW-TIME", "VERSION")
	}
	return h
}

func (p tablePrinter) cells(r electionRow) []string {
	holder := r.Holder
	if holder == "" {
		holder = "<none>"
	}
	term := "-"
	if r.TermAgeSeconds != nil {
		term = shortDuration(secondsDuration(*r.TermAgeSeconds))
	}
	renewed := "-"
	if r.SinceRenewalSeconds != nil {
		renewed = shortDuration(secondsDuration(*r.SinceRenewalSeconds)) + " ago"
	}
	c := []string{r.Name, holder, strconv.FormatInt(r.Token, 10), term, renewed,
		strconv.Itoa(int(r.LeaseDurationSeconds)) + "s", handoffCell(r.Handoff, p.wide), r.State}
	if p.namespaces {
		c = append([]string{r.Namespace}, c...)
	}
	if p.wide {
		c = append(c, timeCell(r.AcquireTime), timeCell(r.RenewTime), r.Version)
	}
	return c
}

// print writes rows, with the header when withHeader.
func (p tablePrinter) print(w io.Writer, rows []electionRow, withHeader bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if withHeader {
		fmt.Fprintln(tw, strings.Join(p.header(), "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(p.cells(r), "\t"))
	}
	return tw.Flush()
}

// handoffCell is the marker as the table shows it: "-" for none, and in
// the narrow table for a leftover; the wide table shows every field.
func handoffCell(h *handoffRow, wide bool) string {
	switch {
	case h == nil, !h.Pending && !wide:
		return "-"
	case wide:
		s := fmt.Sprintf("%s:from=%s,to=%s,token=%d", h.Phase, h.From, orAny(h.To), h.Token)
		if !h.Pending {
			s += "(leftover)"
		}
		return s
	case h.Phase == string(backend.HandoffOffer):
		return "offered to " + orAny(h.To)
	case h.Phase == string(backend.HandoffAccept):
		return "accepted by " + h.To
	default:
		return "transferred to " + h.To
	}
}

func orAny(to string) string {
	if to == "" {
		return "any"
	}
	return to
}

func timeCell(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func secondsDuration(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

// shortDuration is d as kubectl shows ages: 850ms, 7.2s, 45s, 3m12s, 2h5m,
// 3d4h; negative with a leading "-".
func shortDuration(d time.Duration) string {
	if d < 0 {
		return "-" + shortDuration(-d)
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Truncate(100*time.Millisecond).Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// statusList is the -o json output without --watch.
type statusList struct {
	Elections []electionRow `json:"elections"`
}

// printJSON writes v as one line of JSON (--watch -o json).
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// printJSONIndented writes v as indented JSON, as kubectl -o json does.
func printJSONIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// staleNote is what status prints on stderr when a row is stale: the
// verdict rests on two clocks.
const staleNote = "stale: no renewal within the lease duration by this machine's clock; a display hint only: " +
	"the election never compares clocks across machines (a standby takes over only after it saw the record unchanged " +
	"for a lease on its own clock), so clock skew between this machine and the holder's also shows as stale"
