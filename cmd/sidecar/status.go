package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/statusview"
)

const statusUsage = `Usage: %[1]s [flags]

Shows every election in a namespace (-n; default: the namespace of the
kubeconfig's context, as kubectl) or in all of them (-A): its holder, its
fencing token, the age of the term, the time since the last renewal, the
lease duration, a hand-off in progress, and its state: held, claim
pending (a candidate created the record and claims it only a lease
duration later, once no holder of a deleted one can still claim: the
first leader of a new Lease), stale (no renewal within the lease
duration), or released; a shard group's member
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
(--sqlite-path), read-only. With --backend postgres it reads the table of
records (--postgres-url, else LEADER_SIDECAR_POSTGRES_URL as for the
sidecar; --postgres-schema, --postgres-table) in a read-only
transaction, creating nothing; --watch reads it every second.

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
	postgres       postgresConfig
	requestTimeout time.Duration
	set            *pflag.FlagSet
}

// The values of --output; "" is the table.
var statusOutputs = []string{"", "wide", "json"}

func newStatusConfig(name string) *statusConfig {
	c := &statusConfig{set: newFlagSet(name)}
	fs := c.set
	fs.StringVar(&c.backend, "backend", "lease", "where the elections are: lease (Leases on the API server), sqlite (a SQLite file) or postgres (a PostgreSQL table)")
	docMeaning(fs, "backend", "`lease`: Leases on the API server; `sqlite`: the elections of a SQLite file (`--sqlite-path`); `postgres`: the elections of a PostgreSQL table (`--postgres-url`, `--postgres-schema`, `--postgres-table`)")
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
	c.postgres.add(fs)
	docMeaning(fs, "postgres-table", "table of records to read, with `--backend postgres`; status creates nothing, and a table that does not exist is an error")
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
	postgresOnly := []string{"postgres-url", "postgres-schema", "postgres-table", "postgres-signal"}
	only := func(flags []string, backend string) error {
		for _, f := range flags {
			if c.set.Changed(f) {
				return fmt.Errorf("--%s: only with --backend %s", f, backend)
			}
		}
		return nil
	}
	if !slices.Contains([]string{"lease", "sqlite", "postgres"}, c.backend) {
		return oneOf("--backend", c.backend, []string{"lease", "sqlite", "postgres"})
	}
	if c.backend != "sqlite" && c.set.Changed("sqlite-path") {
		return errors.New("--sqlite-path: only with --backend sqlite")
	}
	if c.backend != "postgres" {
		if err := only(postgresOnly, "postgres"); err != nil {
			return err
		}
	}
	switch c.backend {
	case "sqlite":
		if err := only(leaseOnly, "lease"); err != nil {
			return err
		}
		if c.sqlitePath == "" {
			return errors.New("--sqlite-path: required with --backend sqlite: the elections' database file")
		}
		return nil
	case "postgres":
		if err := only(leaseOnly, "lease"); err != nil {
			return err
		}
		return c.postgres.check(true)
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
		c.postgres.urlFromEnv(c.set, p.environ)
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
	v := statusview.View{Out: p.stdout, ErrOut: p.stderr, Now: statusClock, JSON: c.output == "json",
		Table: statusview.Table{Wide: c.output == "wide", Namespaces: c.allNamespaces}}
	if c.watch {
		err = v.Watch(ctx, src)
	} else {
		err = v.List(ctx, src)
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

// source opens the store c names: the API server's Leases (the
// kubeconfig and namespace found as kubectl finds them), or a SQLite file.
func (c *statusConfig) source(environ []string) (statusview.Source, error) {
	switch c.backend {
	case "sqlite":
		return sqliteElections{path: c.sqlitePath}, nil
	case "postgres":
		return postgresElections{opts: postgres.Options{URL: c.postgres.url, Schema: c.postgres.schema, Table: c.postgres.table}}, nil
	}
	getenv := func(k string) string { v, _ := lookup(environ, k); return v }
	cfg, ns, err := kubeclient.KubectlConfig(c.kubeconfig, c.context, getenv)
	if errors.Is(err, kubeclient.ErrNoKubeconfig) {
		return nil, fmt.Errorf("%w; an election on SQLite or PostgreSQL: --backend sqlite --sqlite-path <file>, or --backend postgres --postgres-url <url>", err)
	}
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

func (s leaseElections) Read(ctx context.Context) ([]statusview.Election, error) {
	els, _, err := s.list(ctx)
	return els, err
}

func (s leaseElections) list(ctx context.Context) ([]statusview.Election, string, error) {
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: s.selector})
	if err != nil {
		return nil, "", fmt.Errorf("listing Leases: %w", err)
	}
	var els []statusview.Election
	for i := range list.Items {
		if e, ok := s.electionOf(&list.Items[i]); ok {
			els = append(els, e)
		}
	}
	statusview.Sort(els)
	return els, list.ResourceVersion, nil
}

// electionOf is the election a Lease holds, if it is one status shows.
func (s leaseElections) electionOf(l *coordinationv1.Lease) (statusview.Election, bool) {
	e := statusview.Election{Namespace: l.Namespace, Name: l.Name, Record: lease.RecordOf(l), Version: backend.Version(l.ResourceVersion)}
	return e, s.all || lease.HoldsElection(l)
}

// Follow lists, then watches from the list's version; when the watch
// ends or fails (its version expired, the API server went away) it lists
// again after a second.
func (s leaseElections) Follow(ctx context.Context, updates chan<- statusview.Update, warn func(error)) {
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

func (s leaseElections) followOnce(ctx context.Context, updates chan<- statusview.Update) error {
	els, rv, err := s.list(ctx)
	if err != nil {
		return err
	}
	if !statusview.Send(ctx, updates, statusview.Update{Full: true, Elections: els}) {
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
		var u statusview.Update
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
				u.Gone = []statusview.Election{e}
			} else {
				u.Elections = []statusview.Election{e}
			}
		}
		if !statusview.Send(ctx, updates, u) {
			return nil
		}
	}
}

// sqliteElections are the elections of a SQLite file, read read-only.
type sqliteElections struct{ path string }

func (s sqliteElections) Read(ctx context.Context) ([]statusview.Election, error) {
	stored, err := sqlite.ReadAll(ctx, s.path)
	if err != nil {
		return nil, err
	}
	els := make([]statusview.Election, 0, len(stored))
	for _, st := range stored {
		els = append(els, statusview.Election{Name: st.Election, Record: st.Record, Version: st.Version})
	}
	return els, nil
}

// sqlitePollInterval is how often --watch reads a SQLite file: a read of
// a local file, cheap, and never a write.
const sqlitePollInterval = 200 * time.Millisecond

// Follow reads the file every sqlitePollInterval (pollElections).
func (s sqliteElections) Follow(ctx context.Context, updates chan<- statusview.Update, warn func(error)) {
	pollElections(ctx, s.Read, sqlitePollInterval, updates, warn)
}

// pollElections reads every election with read, each time, every interval
// until ctx ends (the watcher prints only what changed), for the stores
// that --watch polls.
func pollElections(ctx context.Context, read func(context.Context) ([]statusview.Election, error), interval time.Duration,
	updates chan<- statusview.Update, warn func(error)) {
	for ctx.Err() == nil {
		els, err := read(ctx)
		if err != nil && ctx.Err() == nil {
			warn(err)
		} else if err == nil && !statusview.Send(ctx, updates, statusview.Update{Full: true, Elections: els}) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// postgresElections are the elections of a PostgreSQL table, read in a
// read-only transaction; nothing is created.
type postgresElections struct{ opts postgres.Options }

func (s postgresElections) Read(ctx context.Context) ([]statusview.Election, error) {
	stored, err := postgres.ReadAll(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	els := make([]statusview.Election, 0, len(stored))
	for _, st := range stored {
		els = append(els, statusview.Election{Name: st.Name, Record: st.Record, Version: st.Version})
	}
	return els, nil
}

// postgresPollInterval is how often --watch reads a PostgreSQL table:
// one connection and one query each time.
const postgresPollInterval = time.Second

// Follow reads the table every postgresPollInterval (pollElections).
func (s postgresElections) Follow(ctx context.Context, updates chan<- statusview.Update, warn func(error)) {
	pollElections(ctx, s.Read, postgresPollInterval, updates, warn)
}

// statusClock is the observer's clock of `status`: the ages it prints and
// its stale verdicts are read on it (a test sets it; nothing else does).
var statusClock = time.Now
