package statusview

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"
)

// Source is where status reads elections: the Leases of the API server,
// or a SQLite file.
type Source interface {
	// Read returns every election, sorted by namespace and name.
	Read(ctx context.Context) ([]Election, error)
	// Follow sends, until ctx ends, updates that bring a copy of the
	// elections up to date: first every election (full), then each change
	// as it happens, again every election after a gap. Problems it
	// recovers from go to warn.
	Follow(ctx context.Context, updates chan<- Update, warn func(error))
}

// Update brings the elections a watcher knows up to date: with Full,
// Elections are all there are (the others are gone); else Elections
// changed and Gone were deleted.
type Update struct {
	Full      bool
	Elections []Election
	Gone      []Election
}

// Send sends u on updates unless ctx ends first; it reports whether u was
// sent. Sources use it in Follow.
func Send(ctx context.Context, updates chan<- Update, u Update) bool {
	select {
	case updates <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// View prints what a Source holds, at the clock Now: on Out, as a Table
// or, with JSON, as JSON; notes and warnings go to ErrOut.
type View struct {
	Out, ErrOut io.Writer
	Now         func() time.Time
	JSON        bool
	Table       Table
	// staleNoted: the note on stale rows was printed (once per run).
	staleNoted bool
}

// List prints every election once.
func (v *View) List(ctx context.Context, src Source) error {
	els, err := src.Read(ctx)
	if err != nil {
		return err
	}
	now := v.Now()
	rows := make([]Row, 0, len(els))
	for _, e := range els {
		rows = append(rows, RowOf(e, now))
	}
	if v.JSON {
		return printJSONIndented(v.Out, List{Elections: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(v.ErrOut, "No elections found.")
		return nil
	}
	if err := v.Table.Print(v.Out, rows, true); err != nil {
		return err
	}
	v.noteStale(rows)
	return nil
}

// staleRecheck is how often --watch looks again at elections that did not
// change: a holder that stops renewing turns stale with no event.
const staleRecheck = time.Second

// Watch prints every election, then each election's row again whenever
// its changeKey changes, until ctx ends.
func (v *View) Watch(ctx context.Context, src Source) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan Update)
	go src.Follow(ctx, updates, func(err error) { fmt.Fprintf(v.ErrOut, "warning: %v; trying again\n", err) })
	w := newWatcher()
	tick := time.NewTicker(staleRecheck)
	defer tick.Stop()
	for {
		var rows []Row
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			rows = w.apply(u, v.Now())
		case <-tick.C:
			rows = w.recheck(v.Now())
		}
		if err := v.printChanged(rows, w); err != nil {
			return err
		}
	}
}

// printChanged prints the rows --watch found changed.
func (v *View) printChanged(rows []Row, w *watcher) error {
	if len(rows) == 0 {
		return nil
	}
	if v.JSON {
		for _, r := range rows {
			if err := printJSON(v.Out, r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := v.Table.Print(v.Out, rows, !w.headerPrinted); err != nil {
		return err
	}
	w.headerPrinted = true
	v.noteStale(rows)
	return nil
}

// noteStale prints StaleNote on ErrOut once, at the first stale row.
func (v *View) noteStale(rows []Row) {
	if v.staleNoted {
		return
	}
	for _, r := range rows {
		if r.Stale {
			fmt.Fprintln(v.ErrOut, StaleNote)
			v.staleNoted = true
			return
		}
	}
}

// watcher is what --watch knows: every election and the row it printed
// last for each.
type watcher struct {
	elections     map[string]Election
	printed       map[string]string // key -> changeKey of the row printed last
	headerPrinted bool
}

func newWatcher() *watcher {
	return &watcher{elections: map[string]Election{}, printed: map[string]string{}}
}

// apply brings the elections up to date with u and returns the rows that
// changed since they were last printed, sorted.
func (w *watcher) apply(u Update, now time.Time) []Row {
	var rows []Row
	gone := u.Gone
	if u.Full {
		present := map[string]bool{}
		for _, e := range u.Elections {
			present[e.Key()] = true
		}
		for k, e := range w.elections {
			if !present[k] {
				gone = append(gone, e)
			}
		}
	}
	for _, e := range gone {
		if _, known := w.elections[e.Key()]; !known {
			continue
		}
		delete(w.elections, e.Key())
		delete(w.printed, e.Key())
		rows = append(rows, deletedRow(e, now))
	}
	for _, e := range u.Elections {
		w.elections[e.Key()] = e
		if r := RowOf(e, now); w.printed[e.Key()] != r.changeKey() {
			w.printed[e.Key()] = r.changeKey()
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return rows
}

// recheck returns the rows of elections whose state changed with time
// alone (a holder that stopped renewing is now stale).
func (w *watcher) recheck(now time.Time) []Row {
	var rows []Row
	for k, e := range w.elections {
		if r := RowOf(e, now); w.printed[k] != r.changeKey() {
			w.printed[k] = r.changeKey()
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return rows
}

func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
}
