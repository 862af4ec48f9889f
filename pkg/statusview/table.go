package statusview

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// Table prints rows as kubectl prints objects: a header, then a line per
// row, the columns aligned among the rows printed together; Wide adds the
// times and the version (-o wide), Namespaces the namespace (-A).
type Table struct {
	Wide, Namespaces bool
}

func (p Table) header() []string {
	h := []string{"NAME", "HOLDER", "TOKEN", "TERM", "RENEWED", "LEASE", "HANDOFF", "STATE"}
	if p.Namespaces {
		h = append([]string{"NAMESPACE"}, h...)
	}
	if p.Wide {
		h = append(h, "ACQUIRE-TIME", "RENEW-TIME", "VERSION")
	}
	return h
}

func (p Table) cells(r Row) []string {
	holder := r.Holder
	if holder == "" {
		holder = "<none>"
	}
	term := "-"
	if r.TermAgeSeconds != nil {
		term = shortDuration(secondsDuration(*r.TermAgeSeconds))
	}
	// A record nobody holds was written by a release (or never held): its
	// renewal and lease are the release's, not a holder's, so the
	// narrow table shows neither (the wide one has the record's times).
	renewed, lease := "-", "-"
	if r.SinceRenewalSeconds != nil && r.Holder != "" {
		renewed = shortDuration(secondsDuration(*r.SinceRenewalSeconds)) + " ago"
	}
	if r.Holder != "" {
		lease = strconv.Itoa(int(r.LeaseDurationSeconds)) + "s"
	}
	state := r.State
	if r.ClaimFrom != nil {
		state = "claim pending, " + shortDuration(max(0, r.ClaimFrom.Sub(r.ObservedAt))) + " left"
	}
	c := []string{r.Name, holder, strconv.FormatInt(r.Token, 10), term, renewed,
		lease, handoffCell(r.Handoff, p.Wide), state}
	if p.Namespaces {
		c = append([]string{r.Namespace}, c...)
	}
	if p.Wide {
		c = append(c, timeCell(r.AcquireTime), timeCell(r.RenewTime), r.Version)
	}
	return c
}

// Print writes rows, with the header when withHeader.
func (p Table) Print(w io.Writer, rows []Row, withHeader bool) error {
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
func handoffCell(h *Handoff, wide bool) string {
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
	case h.Phase == string(backend.HandoffReserve):
		return "left to " + orAny(h.To) + " or another revision"
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
