package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

const statusUsage = `Usage: %[1]s [flags]

Shows every election in a namespace (-n; default: the namespace of the
kubeconfig's context, as kubectl) or in all of them (-A): its holder, its
fencing token, the age of the term, the time since the last renewal, the
lease duration, a hand-off in progress, and its state: held, stale (no
renewal within the lease duration), or released; a shard group's member
records (<group>-member-<replica>, token 0, the term how long the
replica has been in the group) show as member. With --watch it goes on
and prints an election's row again whenever its holder, token, hand-off or
state changes.

Which Leases are elections: those that hold a leader-election record, as
this sidecar and client-go's leaderelection write it (spec.leaseTransitions
or spec.acquireTime set); the heartbeat Leases of nodes and API servers are
left out. --all-leases shows every Lease; -l selects by label.

The ages and "stale" compare the holder's timestamps with this machine's
clock: a hint for the eye only. The election itself never compares clocks
across machines: a standby takes over once it has seen the record
unchanged for a lease duration on its own clock.

With --backend sqlite it reads the SQLite file of local elections
(--sqlite-path), read-only.

Exit status: 0 once shown (with --watch, on SIGINT or SIGTERM); 1 when the
store could not be read; 2 for bad usage.
`

// statusConfig is what sidecar status (kubectl leader status) is asked.
type statusConfig struct {
	backend        string
	namespace      string
	allNamespaces  bool
	kubeconfig     string
	context        string
	selector       string
	allLeases      bool
	output         string
	watch          bool
	sqlitePath     string
	requestTimeout time.Duration
	set            *pflag.FlagSet
}

// The values of --output; "" is the table.
var statusOutputs = []string{"", "wide", "json"}

func newStatusConfig(name string) *statusConfig {
	c := &statusConfig{set: newFlagSet(name)}
	fs := c.set
	fs.StringVar(&c.backend, "backend", "lease", "where the elections are: lease (Leases on the API server) or sqlite (a SQLite file)")
	docMeaning(fs, "backend", "`lease`: Leases on the API server; `sqlite`: the elections of a SQLite file (`--sqlite-path`)")
	fs.StringVarP(&c.namespace, "namespace", "n", "", "namespace to show (default: the kubeconfig context's, as kubectl)")
	docDefault(fs, "namespace", "the context's, else `default`")
	docMeaning(fs, "namespace", "namespace to show; in a Pod without a kubeconfig, the Pod's")
	fs.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "show the elections of every namespace")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the files in $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	docDefault(fs, "kubeconfig", "`$KUBECONFIG`, else `~/.kube/config`, else in-cluster")
	docMeaning(fs, "kubeconfig", "kubeconfig file, found as kubectl finds it (unlike the sidecar, which never reads `~/.kube/config`)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the current context)")
	docDefault(fs, "context", "the current context")
	docMeaning(fs, "context", "kubeconfig context to use, as `kubectl --context`")
	fs.StringVarP(&c.selector, "selector", "l", "", "show only Leases with these labels (a label selector, e.g. app=web)")
	fs.BoolVar(&c.allLeases, "all-leases", false, "show every Lease, not only those that hold a leader-election record")
	docMeaning(fs, "all-leases", "show every Lease, the heartbeat Leases of nodes and API servers too, not only those holding a leader-election record (`spec.leaseTransitions` or `spec.acquireTime` set)")
	fs.StringVarP(&c.output, "output", "o", "", "output format: wide (more columns) or json (default: a table)")
	docDefault(fs, "output", "a table")
	docMeaning(fs, "output", "`wide`: the table with the acquire and renew times and the version; `json`: every field ([fields](#fields))")
	fs.BoolVarP(&c.watch, "watch", "w", false, "after the list, print an election's row again whenever its holder, token, hand-off or state changes")
	docMeaning(fs, "watch", "after the list, print an election's row again whenever its holder, token, hand-off or state changes; with `-o json`, one object a line")
	fs.StringVar(&c.sqlitePath, "sqlite-path", "", "the SQLite file of the elections (with --backend sqlite)")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 30*time.Second, "how long to wait for each answer of the API server (not a watch)")
	return c
}

// check refuses what cannot be shown; each error names the flag.
func (c *statusConfig) check() error {
	if c.set.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: status takes flags only (-n, -A, -o, --watch, ...)", c.set.Arg(0))
	}
	if !slices.Contains(statusOutputs, c.output) {
		return fmt.Errorf("--output: must be wide or json, got %q", c.output)
	}
	if c.requestTimeout <= 0 {
		return fmt.Errorf("--request-timeout: must be greater than 0, got %v", c.requestTimeout)
	}
	leaseOnly := []string{"namespace", "all-namespaces", "kubeconfig", "context", "selector", "all-leases"}
	switch c.backend {
	case "lease":
		if c.set.Changed("sqlite-path") {
			return errors.New("--sqlite-path: only with --backend sqlite")
		}
	case "sqlite":
		for _, f := range leaseOnly {
			if c.set.Changed(f) {
				return fmt.Errorf("--%s: only with --backend lease", f)
			}
		}
		if c.sqlitePath == "" {
			return errors.New("--sqlite-path: required with --backend sqlite: the elections' database file")
		}
		return nil
	default:
		return oneOf("--backend", c.backend, []string{"lease", "sqlite"})
	}
	if c.allNamespaces && c.set.Changed("namespace") {
		return errors.New("--namespace and --all-namespaces: give one of them")
	}
	if c.namespace != "" {
		if errs := validation.IsDNS1123Label(c.namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace: %q is not a valid namespace name: %s", c.namespace, strings.Join(errs, "; "))
		}
	}
	if _, err := labels.Parse(c.selector); err != nil {
		return fmt.Errorf("--selector: %v", err)
	}
	return nil
}

// runStatus is "sidecar status", and "kubectl leader status" (prog names
// it in messages).
func runStatus(ctx context.Context, p process, args []string, prog string) int {
	c := newStatusConfig(prog)
	err := parseArgs(c.set, args, fmt.Sprintf(statusUsage, prog), p.stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = c.check()
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: %v\n", prog, err)
		return 2
	}
	ctx, cancel := cancelOnSignal(ctx, p.signals)
	defer cancel()
	src, err := c.source(p.environ)
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: %v\n", prog, err)
		return 1
	}
	v := statusView{out: p.stdout, errOut: p.stderr, now: statusClock, json: c.output == "json",
		table: tablePrinter{wide: c.output == "wide", namespaces: c.allNamespaces}}
	if c.watch {
		err = v.watch(ctx, src)
	} else {
		err = v.list(ctx, src)
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

// statusSource is where status reads elections.
type statusSource interface {
	// read returns every election, sorted by namespace and name.
	read(ctx context.Context) ([]storedElection, error)
	// follow sends, until ctx ends, updates that bring a copy of the
	// elections up to date: first every election (full), then each change
	// as it happens, again every election after a gap. Problems it
	// recovers from go to warn.
	follow(ctx context.Context, updates chan<- statusUpdate, warn func(error))
}

// statusUpdate brings the elections a watcher knows up to date: with full,
// elections are all there are (the others are gone); else elections
// changed and gone were deleted.
type statusUpdate struct {
	full      bool
	elections []storedElection
	gone      []storedElection
}

// source opens the store c names: the API server's Leases (the
// kubeconfig and namespace found as kubectl finds them), or a SQLite file.
func (c *statusConfig) source(environ []string) (statusSource, error) {
	if c.backend == "sqlite" {
		return sqliteElections{path: c.sqlitePath}, nil
	}
	getenv := func(k string) string { v, _ := lookup(environ, k); return v }
	cfg, ns, err := kubeclient.KubectlConfig(c.kubeconfig, c.context, getenv)
	if err != nil {
		return nil, err
	}
	switch {
	case c.allNamespaces:
		ns = metav1.NamespaceAll
	case c.namespace != "":
		ns = c.namespace
	}
	client, err := kubeclient.NewClient(cfg, kubeclient.Options{Timeout: c.requestTimeout, UserAgent: "leader-sidecar-status/" + currentVersion()})
	if err != nil {
		return nil, err
	}
	return leaseElections{leases: client.Leases(ns), selector: c.selector, all: c.allLeases}, nil
}

// leaseElections are the Leases of a namespace (or all) on the API server.
type leaseElections struct {
	leases   *kubeclient.Leases
	selector string
	all      bool
}

func (s leaseElections) read(ctx context.Context) ([]storedElection, error) {
	els, _, err := s.list(ctx)
	return els, err
}

func (s leaseElections) list(ctx context.Context) ([]storedElection, string, error) {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.selector})
	if err != nil {
		return nil, "", fmt.Errorf("listing Leases: %w", err)
	}
	var els []storedElection
	for i := range list.Items {
		if e, ok := s.electionOf(&list.Items[i]); ok {
			els = append(els, e)
		}
	}
	sortElections(els)
	return els, list.ResourceVersion, nil
}

// electionOf is the election a Lease holds, if it is one status shows.
func (s leaseElections) electionOf(l *coordinationv1.Lease) (storedElection, bool) {
	e := storedElection{namespace: l.Namespace, name: l.Name, rec: lease.RecordOf(l), version: backend.Version(l.ResourceVersion)}
	return e, s.all || lease.HoldsElection(l)
}

// follow lists, then watches from the list's version; when the watch
// ends or fails (its version expired, the API server went away) it lists
// again after a second.
func (s leaseElections) follow(ctx context.Context, updates chan<- statusUpdate, warn func(error)) {
	for ctx.Err() == nil {
		if err := s.followOnce(ctx, updates); err != nil && ctx.Err() == nil {
			warn(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s leaseElections) followOnce(ctx context.Context, updates chan<- statusUpdate) error {
	els, rv, err := s.list(ctx)
	if err != nil {
		return err
	}
	if !send(ctx, updates, statusUpdate{full: true, elections: els}) {
		return nil
	}
	w, err := s.leases.Watch(ctx, metav1.ListOptions{LabelSelector: s.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return fmt.Errorf("watching Leases: %w", err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return nil
		case ev, open = <-w.ResultChan():
		}
		if !open {
			return nil // the server ended the watch: list again
		}
		var u statusUpdate
		switch ev.Type {
		case watch.Error:
			return fmt.Errorf("watching Leases: %v", ev.Object)
		case watch.Bookmark:
			continue
		case watch.Added, watch.Modified, watch.Deleted:
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			e, shown := s.electionOf(l)
			if ev.Type == watch.Deleted || !shown {
				u.gone = []storedElection{e}
			} else {
				u.elections = []storedElection{e}
			}
		}
		if !send(ctx, updates, u) {
			return nil
		}
	}
}

// sqliteElections are the elections of a SQLite file, read read-only.
type sqliteElections struct{ path string }

func (s sqliteElections) read(ctx context.Context) ([]storedElection, error) {
	stored, err := sqlite.ReadAll(ctx, s.path)
	if err != nil {
		return nil, err
	}
	els := make([]storedElection, 0, len(stored))
	for _, st := range stored {
		els = append(els, storedElection{name: st.Election, rec: st.Record, version: st.Version})
	}
	return els, nil
}

// sqlitePollInterval is how often --watch reads a SQLite file: a read of
// a local file, cheap, and never a write.
const sqlitePollInterval = 200 * time.Millisecond

// follow reads the file every sqlitePollInterval: every election, each
// time (the watcher prints only what changed).
func (s sqliteElections) follow(ctx context.Context, updates chan<- statusUpdate, warn func(error)) {
	for ctx.Err() == nil {
		els, err := s.read(ctx)
		if err != nil && ctx.Err() == nil {
			warn(err)
		} else if err == nil && !send(ctx, updates, statusUpdate{full: true, elections: els}) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(sqlitePollInterval):
		}
	}
}

func send(ctx context.Context, updates chan<- statusUpdate, u statusUpdate) bool {
	select {
	case updates <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

func sortElections(els []storedElection) {
	sort.Slice(els, func(i, j int) bool { return els[i].key() < els[j].key() })
}

// statusClock is the observer's clock of `status`: the ages it prints and
// its stale verdicts are read on it (a test sets it; nothing else does).
var statusClock = time.Now

// statusView prints what a statusSource holds, at the clock now.
type statusView struct {
	out, errOut io.Writer
	now         func() time.Time
	json        bool
	table       tablePrinter
	// staleNoted: the note on stale rows was printed (once per run).
	staleNoted bool
}

// list prints every election once.
func (v *statusView) list(ctx context.Context, src statusSource) error {
	els, err := src.read(ctx)
	if err != nil {
		return err
	}
	now := v.now()
	rows := make([]electionRow, 0, len(els))
	for _, e := range els {
		rows = append(rows, rowOf(e, now))
	}
	if v.json {
		return printJSONIndented(v.out, statusList{Elections: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(v.errOut, "No elections found.")
		return nil
	}
	if err := v.table.print(v.out, rows, true); err != nil {
		return err
	}
	v.noteStale(rows)
	return nil
}

// staleRecheck is how often --watch looks again at elections that did not
// change: a holder that stops renewing turns stale with no event.
const staleRecheck = time.Second

// watch prints every election, then each election's row again whenever
// its changeKey changes, until ctx ends.
func (v *statusView) watch(ctx context.Context, src statusSource) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan statusUpdate)
	go src.follow(ctx, updates, func(err error) { fmt.Fprintf(v.errOut, "warning: %v; trying again\n", err) })
	w := newStatusWatcher()
	tick := time.NewTicker(staleRecheck)
	defer tick.Stop()
	for {
		var rows []electionRow
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			rows = w.apply(u, v.now())
		case <-tick.C:
			rows = w.recheck(v.now())
		}
		if err := v.printChanged(rows, w); err != nil {
			return err
		}
	}
}

// printChanged prints the rows --watch found changed.
func (v *statusView) printChanged(rows []electionRow, w *statusWatcher) error {
	if len(rows) == 0 {
		return nil
	}
	if v.json {
		for _, r := range rows {
			if err := printJSON(v.out, r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := v.table.print(v.out, rows, !w.headerPrinted); err != nil {
		return err
	}
	w.headerPrinted = true
	v.noteStale(rows)
	return nil
}

// noteStale prints staleNote on stderr once, at the first stale row.
func (v *statusView) noteStale(rows []electionRow) {
	if v.staleNoted {
		return
	}
	for _, r := range rows {
		if r.Stale {
			fmt.Fprintln(v.errOut, staleNote)
			v.staleNoted = true
			return
		}
	}
}

// statusWatcher is what --watch knows: every election and the row it
// printed last for each.
type statusWatcher struct {
	elections     map[string]storedElection
	printed       map[string]string // key -> changeKey of the row printed last
	headerPrinted bool
}

func newStatusWatcher() *statusWatcher {
	return &statusWatcher{elections: map[string]storedElection{}, printed: map[string]string{}}
}

// apply brings the elections up to date with u and returns the rows that
// changed since they were last printed, sorted.
func (w *statusWatcher) apply(u statusUpdate, now time.Time) []electionRow {
	var rows []electionRow
	gone := u.gone
	if u.full {
		present := map[string]bool{}
		for _, e := range u.elections {
			present[e.key()] = true
		}
		for k, e := range w.elections {
			if !present[k] {
				gone = append(gone, e)
			}
		}
	}
	for _, e := range gone {
		if _, known := w.elections[e.key()]; !known {
			continue
		}
		delete(w.elections, e.key())
		delete(w.printed, e.key())
		rows = append(rows, deletedRow(e, now))
	}
	for _, e := range u.elections {
		w.elections[e.key()] = e
		if r := rowOf(e, now); w.printed[e.key()] != r.changeKey() {
			w.printed[e.key()] = r.changeKey()
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return rows
}

// recheck returns the rows of elections whose state changed with time
// alone (a holder that stopped renewing is now stale).
func (w *statusWatcher) recheck(now time.Time) []electionRow {
	var rows []electionRow
	for k, e := range w.elections {
		if r := rowOf(e, now); w.printed[k] != r.changeKey() {
			w.printed[k] = r.changeKey()
			rows = append(rows, r)
		}
	}
	sortRows(rows)
	return rows
}

func sortRows(rows []electionRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name
	})
}
