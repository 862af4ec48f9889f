package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/postgres"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
	"github.com/leader-sidecar/leader-sidecar/pkg/shardgroup"
)

const resetUsage = `Usage: sidecar reset --sqlite-path <file> [--lease-name <name>] [flags]
       sidecar reset --backend lease [--lease-name <name>] [-n <namespace>] [flags]
       sidecar reset --backend postgres [--postgres-url <url>] [--lease-name <name>] [flags]
                 (the URL also from LEADER_SIDECAR_POSTGRES_URL, as the sidecar's)
       sidecar reset ... --shards <N> [--shard-group <group>]

Resets an election's record, in an SQLite file, a Lease or a PostgreSQL
table: the one way to clear it, as the SQLite file and the PostgreSQL
table refuse to delete a record, and a Lease deleted restarts its token
(a candidate that found none could lead beside a holder that still runs).
The record is not removed: it is written back released (no holder, no
hand-off in progress) with its token kept, so candidates may take it at
once and the next leader's token is above every token issued before. What
your resources remember of tokens stays valid.

It never takes the record from a holder that may still run. A record that
names a holder is watched for the lease duration it declares, one emptied
by something other than a release for at least --lease-duration (its
holder may still claim it), at most --max-record-lease-duration (the bound
the election's sidecars trust), as a candidate would, and reset only if nobody
wrote it meanwhile (written with a compare-and-swap on the version read);
a holder that renews keeps it. Stop the election's sidecars first (each
releases as it stops) to reset at once. A record already released is left
as it is. With --shards it resets a shard group's N shard records at once:
it reads them all, waits once, and writes each with a compare-and-swap.

With --min-token N the record is written with a token of at least N: to
carry the tokens your guards remember into a store that starts lower (an
election moved to another backend, a new SQLite file or PostgreSQL
table), run it on the new store, with N the highest token the old one
issued, before its first sidecar starts. A missing record is then
created (and a missing SQLite file), not released but held by "reset" for
--lease-duration, as a record a candidate creates is: a holder of an
earlier record may still claim. Either way the next leader's token is
above N.

On Leases it is what the charts' uninstall runs (a post-delete hook): the
uninstall takes the sidecars' RBAC away before they can release, so the
Lease would name a Pod that is gone until its lease passes, and a quick
reinstall would wait it out. With --if-abandoned a record that its holder
renews is left, with exit status 0: the election is in use elsewhere.

Exit status: 0 once the record is released (or created, with
--min-token), or when there is none (or,
with --if-abandoned, when a holder renews it); 1 when a holder renewed it,
or the file does not exist (nothing is created) or the store could not be
read or written, with the reason; 2 for bad usage.
`

// resetConfig is what sidecar reset is asked.
type resetConfig struct {
	backend, sqlitePath, name      string
	namespace, kubeconfig, context string
	leaseDuration, bound           time.Duration
	ifAbandoned                    bool
	minToken                       int64
	shards                         int
	group                          string
	postgres                       postgresConfig
	set                            *pflag.FlagSet
}

func newResetConfig() *resetConfig {
	c := &resetConfig{}
	fs := newFlagSet("sidecar reset")
	c.set = fs
	fs.StringVar(&c.backend, "backend", "sqlite", "where the election's record is: sqlite (--sqlite-path), lease (a Lease on the API server) or postgres (--postgres-url)")
	fs.StringVar(&c.sqlitePath, "sqlite-path", "", "the SQLite database file of the election (required with --backend sqlite)")
	fs.StringVar(&c.name, "lease-name", "leader-sidecar", "name of the election (the SQLite or PostgreSQL row, or the Lease)")
	fs.StringVarP(&c.namespace, "namespace", "n", "", "namespace of the Lease (default: the kubeconfig context's, as kubectl; in a Pod, the Pod's)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the files in $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.DurationVar(&c.leaseDuration, "lease-duration", election.DefaultLeaseDuration,
		"the election's lease duration (its sidecars' --lease-duration): how long a record emptied by hand is waited out, as its holder may still claim it")
	fs.DurationVar(&c.bound, "max-record-lease-duration", election.DefaultMaxRecordLeaseDuration(election.DefaultLeaseDuration),
		"the longest lease duration of the record waited out, as the election's sidecars bound it (their --max-record-lease-duration)")
	fs.IntVar(&c.shards, "shards", 0, "reset the shard records of a shard group of this many shards (<group>-shard-<i>), not --lease-name's election")
	fs.StringVar(&c.group, "shard-group", "", "with --shards: the group (default: --lease-name)")
	c.postgres.add(fs)
	fs.BoolVar(&c.ifAbandoned, "if-abandoned", false, "leave a record that its holder renews while reset watches, and exit 0: the election is in use elsewhere")
	fs.Int64Var(&c.minToken, "min-token", 0, "write the record with a token of at least this, creating it if missing (held by \"reset\" for --lease-duration): to carry the tokens of another store into this one")
	return c
}

func (c *resetConfig) check() error {
	switch {
	case !slices.Contains([]string{"sqlite", "lease", "postgres"}, c.backend):
		return oneOf("--backend", c.backend, []string{"sqlite", "lease", "postgres"})
	case c.backend == "sqlite" && c.sqlitePath == "":
		return errors.New("--sqlite-path: required: the election's database file")
	case c.backend != "sqlite" && c.set.Changed("sqlite-path"):
		return errors.New("--sqlite-path: only with --backend sqlite")
	case c.name == "":
		return errors.New("--lease-name: must not be empty")
	case c.shards < 0 || c.shards > shard.MaxShards:
		return fmt.Errorf("--shards: must be from 0 (one election) to %d, got %d", shard.MaxShards, c.shards)
	case c.shards == 0 && c.set.Changed("shard-group"):
		return errors.New("--shard-group: only with --shards")
	case c.leaseDuration <= 0:
		return fmt.Errorf("--lease-duration: must be greater than 0, got %v", c.leaseDuration)
	case c.bound <= 0:
		return fmt.Errorf("--max-record-lease-duration: must be greater than 0, got %v", c.bound)
	case c.minToken < 0:
		return fmt.Errorf("--min-token: must be 0 (none) or more, got %d", c.minToken)
	case c.backend == "lease" && c.minToken >= math.MaxInt32:
		return fmt.Errorf("--min-token: a Lease's token is an int32, and the next term adds one: at most %d, got %d", math.MaxInt32-1, c.minToken)
	case c.ifAbandoned && c.minToken > 0:
		return errors.New("--min-token: not with --if-abandoned, which leaves a record in use as it is")
	}
	if c.backend != "lease" {
		for _, f := range []string{"namespace", "kubeconfig", "context"} {
			if c.set.Changed(f) {
				return fmt.Errorf("--%s: only with --backend lease", f)
			}
		}
	}
	if c.backend != "postgres" {
		for _, f := range []string{"postgres-url", "postgres-schema", "postgres-table", "postgres-signal"} {
			if c.set.Changed(f) {
				return fmt.Errorf("--%s: only with --backend postgres", f)
			}
		}
	}
	return c.postgres.check(c.backend == "postgres")
}

// runReset is "sidecar reset": it writes an election's record back
// released, its token kept, once no holder can still claim it. A signal
// ends the wait at once.
func runReset(ctx context.Context, p process, args []string) int {
	c := newResetConfig()
	err := parseArgs(c.set, args, resetUsage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(p.stderr, "sidecar reset: %v\n", err)
		return 2
	case c.set.NArg() > 0:
		fmt.Fprintf(p.stderr, "sidecar reset: unexpected argument %q\n", c.set.Arg(0))
		return 2
	}
	c.postgres.urlFromEnv(c.set, p.environ)
	if err := c.check(); err != nil {
		fmt.Fprintf(p.stderr, "sidecar reset: %v\n", err)
		return 2
	}
	ctx, cancel := cancelOnSignal(ctx, p.signals)
	defer cancel()
	open, where, err := c.opener(p.environ)
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar reset: %v\n", err)
		return 1
	}
	code := 0
	rule := resetRule{leaseDuration: c.leaseDuration, bound: c.bound, ifAbandoned: c.ifAbandoned, minToken: c.minToken,
		waiting: func(d time.Duration, holders []string) {
			fmt.Fprintf(p.stdout, "waiting %v for the lease of holder %s to pass (a holder that renews meanwhile keeps the record)...\n",
				d, strings.Join(holders, ", "))
		}}
	for _, r := range resetRecords(ctx, open, c.names(), rule) {
		if r.err != nil {
			fmt.Fprintf(p.stderr, "sidecar reset: election %q in %s: %v\n", r.name, where, r.err)
			code = 1
			continue
		}
		fmt.Fprintf(p.stdout, "election %q in %s: %s\n", r.name, where, r.msg)
	}
	return code
}

// storeOpener opens the store's record of one election, by name.
type storeOpener func(ctx context.Context, name string) (backend.Backend, error)

// opener checks that the store can be reached and returns how to open an
// election's record in it, and where it is.
func (c *resetConfig) opener(environ []string) (storeOpener, string, error) {
	switch c.backend {
	case "postgres":
		// Polled: a reset reads, waits and writes once, and needs no
		// connection for LISTEN.
		return func(ctx context.Context, name string) (backend.Backend, error) {
			b, err := postgres.Open(ctx, postgres.Options{URL: c.postgres.url, Schema: c.postgres.schema, Table: c.postgres.table,
				Election: name, Signal: postgres.SignalPoll})
			if err != nil {
				return nil, fmt.Errorf("--postgres-url: %w", err)
			}
			return b, nil
		}, "PostgreSQL table " + c.postgres.table, nil
	case "lease":
		getenv := func(k string) string { v, _ := lookup(environ, k); return v }
		cfg, ns, err := kubeclient.KubectlConfig(c.kubeconfig, c.context, getenv)
		if err != nil {
			return nil, "", err
		}
		if c.namespace != "" {
			ns = c.namespace
		}
		client, err := kubeclient.NewClient(cfg, kubeclient.Options{UserAgent: "leader-sidecar-reset/" + currentVersion()})
		if err != nil {
			return nil, "", err
		}
		return func(_ context.Context, name string) (backend.Backend, error) {
			return lease.New(lease.Options{Client: client, Namespace: ns, Name: name})
		}, "namespace " + ns, nil
	}
	// Open creates a missing file: a path that names none (a typo) would
	// otherwise become an empty election database, "reset". With
	// --min-token creating it is what was asked.
	if _, err := os.Stat(c.sqlitePath); err != nil && !(errors.Is(err, os.ErrNotExist) && c.minToken > 0) {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%s does not exist", c.sqlitePath)
		}
		return nil, "", fmt.Errorf("--sqlite-path: %w", err)
	}
	return func(ctx context.Context, name string) (backend.Backend, error) {
		b, err := sqlite.Open(ctx, sqlite.Options{Path: c.sqlitePath, Election: name})
		if err != nil {
			return nil, fmt.Errorf("--sqlite-path: %w", err)
		}
		return b, nil
	}, c.sqlitePath, nil
}

// names are the elections to reset: --lease-name, or with --shards the
// group's shard records.
func (c *resetConfig) names() []string {
	if c.shards == 0 {
		return []string{c.name}
	}
	group := c.group
	if group == "" {
		group = c.name
	}
	names := make([]string, c.shards)
	for i := range names {
		names[i] = shardgroup.ShardRecord(group, i)
	}
	return names
}

// resetOutcome is what reset did with one election's record.
type resetOutcome struct {
	name string
	msg  string
	err  error
	// Read in the first pass, written in the second.
	rec     backend.Record
	version backend.Version
	wait    time.Duration
	done    bool
}

// resetRule is how reset treats a record: leaseDuration and bound as
// resetRecords says; ifAbandoned leaves a record written meanwhile;
// minToken, when above 0, is the least token written.
type resetRule struct {
	leaseDuration, bound time.Duration
	ifAbandoned          bool
	minToken             int64
	// waiting, if set, is told how long reset waits before it does.
	waiting func(d time.Duration, holders []string)
}

// resetRecords writes each named record back released with its token
// (with rule.minToken, at least that), once nobody can still claim it,
// and says what it did with each. It reads them all, waits once (the
// longest of their waits: a record seen unchanged for longer than its own
// wait is as safe to take), then writes each with a compare-and-swap on
// the version it read. A record is waited out as a candidate would: a
// holder's for the lease it declares, which its holder wrote; one emptied
// by hand for at least the election's leaseDuration too, as its holder
// may still claim it (and would take it back); at most bound. One
// released already is left as it is, unless its token is below minToken:
// it is written again at once, released (a candidate may take a released
// record at once anyway, and the compare-and-swap keeps one that did). A
// missing record is left, or with minToken created held by resetHolder
// for leaseDuration: a holder of a record that was deleted may still
// claim, and candidates wait that out as for a record one of them
// created. With ifAbandoned a record written meanwhile is left, and that
// is no error. Each record's store is opened for one step and closed, so
// that many records never hold many connections.
func resetRecords(ctx context.Context, open storeOpener, names []string, rule resetRule) []resetOutcome {
	out := make([]resetOutcome, len(names))
	step := func(o *resetOutcome, do func(backend.Backend) error) {
		b, err := open(ctx, o.name)
		if err != nil {
			o.err, o.done = err, true
			return
		}
		defer func() { _ = b.Close() }()
		if err := do(b); err != nil {
			o.err, o.done = err, true
		}
	}
	var longest time.Duration
	for i, name := range names {
		o := &out[i]
		o.name = name
		step(o, func(b backend.Backend) error {
			rec, version, err := b.Get(ctx)
			switch {
			case errors.Is(err, backend.ErrNotFound) && rule.minToken > 0:
				now := time.Now()
				held := backend.Record{HolderIdentity: resetHolder, LeaseDurationSeconds: int32(max(1, math.Ceil(rule.leaseDuration.Seconds()))),
					AcquireTime: now, RenewTime: now, Transitions: rule.minToken}
				if _, err := b.Create(ctx, held); err != nil {
					if errors.Is(err, backend.ErrAlreadyExists) {
						return fmt.Errorf("a candidate created the record while reset did: run reset again: %w", err)
					}
					return err
				}
				o.msg, o.done = fmt.Sprintf("created at token %d, held by %q for %v: the next leader's token is above it", rule.minToken, resetHolder, rule.leaseDuration), true
				return nil
			case errors.Is(err, backend.ErrNotFound):
				o.msg, o.done = "no record: nothing to reset", true
				return nil
			case err != nil:
				return err
			case election.IsReleaseShape(rec) && rec.Handoff.IsZero() && rec.Transitions >= rule.minToken:
				o.msg, o.done = fmt.Sprintf("released already at token %d", rec.Transitions), true
				return nil
			}
			o.rec, o.version = rec, version
			if !election.IsReleaseShape(rec) || !rec.Handoff.IsZero() {
				o.wait = time.Duration(rec.LeaseDurationSeconds) * time.Second
				if rec.HolderIdentity == "" {
					o.wait = max(o.wait, rule.leaseDuration)
				}
			}
			longest = max(longest, min(o.wait, rule.bound))
			return nil
		})
	}
	pending := false
	for _, o := range out {
		pending = pending || !o.done
	}
	if !pending {
		return out
	}
	if rule.waiting != nil && longest > 0 {
		var holders []string
		for _, o := range out {
			if !o.done {
				holders = append(holders, fmt.Sprintf("%q", o.rec.HolderIdentity))
			}
		}
		slices.Sort(holders)
		rule.waiting(longest, slices.Compact(holders))
	}
	select {
	case <-ctx.Done():
		for i := range out {
			if !out[i].done {
				out[i].err = fmt.Errorf("stopped while waiting out the lease of holder %q: %w", out[i].rec.HolderIdentity, ctx.Err())
			}
		}
		return out
	case <-time.After(longest):
	}
	for i := range out {
		o := &out[i]
		if o.done {
			continue
		}
		step(o, func(b backend.Backend) error {
			token := max(o.rec.Transitions, rule.minToken)
			_, err := b.Update(ctx, o.version, election.ReleaseShape(token, time.Now()))
			switch {
			case errors.Is(err, backend.ErrConflict) && rule.ifAbandoned:
				o.msg = fmt.Sprintf("left as it is: it was written while reset waited (holder %q renewed it, or another took it), so the election is in use", o.rec.HolderIdentity)
				return nil
			case errors.Is(err, backend.ErrConflict):
				return fmt.Errorf("the record changed while reset waited (holder %q renewed it, or another took it): it is in use; "+
					"stop the election's sidecars first", o.rec.HolderIdentity)
			case err != nil:
				return err
			}
			o.msg = fmt.Sprintf("released at token %d (the next leader's token is above it)", token)
			return nil
		})
	}
	return out
}

// resetHolder names reset as the holder of a record it creates.
const resetHolder = "reset"
