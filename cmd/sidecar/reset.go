package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/sqlite"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

const resetUsage = `Usage: sidecar reset --sqlite-path <file> [--lease-name <name>] [--max-record-lease-duration d]

Resets an election's record in an SQLite file: the one way to clear it, as
the file refuses to delete a record (a candidate that found none could
lead beside a holder that still runs). The record is not removed: it is
written back released (no holder, no hand-off in progress) with its token
kept, so candidates may take it at once and the next leader's token is
above every token issued before. What your resources remember of tokens
stays valid.

It never takes the record from a holder that may still run. A record that
names a holder is watched for its lease duration (at most
--max-record-lease-duration, the bound the election's sidecars trust, as
they do), and reset only if nobody wrote it meanwhile (written with a
compare-and-swap on the version read); a holder that renews keeps it. Stop the election's sidecars first (each
releases as it stops) to reset at once.

Exit status: 0 once the record is released, or when there is none; 1 when
a holder renewed it, or the file does not exist (nothing is created) or
could not be read or written, with the reason; 2 for bad usage.
`

// runReset is "sidecar reset": it writes an SQLite election's record back
// released, its token kept, once no holder can still claim it. A signal
// ends the wait at once.
func runReset(ctx context.Context, p process, args []string) int {
	fs := newFlagSet("sidecar reset")
	path := fs.String("sqlite-path", "", "the SQLite database file of the election (required)")
	name := fs.String("lease-name", "leader-sidecar", "name of the election (the SQLite row)")
	bound := fs.Duration("max-record-lease-duration", election.DefaultMaxRecordLeaseDuration(election.DefaultLeaseDuration),
		"the longest lease duration of the record waited out, as the election's sidecars bound it (their --max-record-lease-duration)")
	err := parseArgs(fs, args, resetUsage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(p.stderr, "sidecar reset: %v\n", err)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(p.stderr, "sidecar reset: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *path == "":
		fmt.Fprintln(p.stderr, "sidecar reset: --sqlite-path: required: the election's database file")
		return 2
	case *name == "":
		fmt.Fprintln(p.stderr, "sidecar reset: --lease-name: must not be empty")
		return 2
	case *bound <= 0:
		fmt.Fprintf(p.stderr, "sidecar reset: --max-record-lease-duration: must be greater than 0, got %v\n", *bound)
		return 2
	}
	// Open creates a missing file: a path that names none (a typo) would
	// otherwise become an empty election database, "reset".
	if _, err := os.Stat(*path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%s does not exist", *path)
		}
		fmt.Fprintf(p.stderr, "sidecar reset: --sqlite-path: %v\n", err)
		return 1
	}
	ctx, cancel := cancelOnSignal(ctx, p.signals)
	defer cancel()
	b, err := sqlite.Open(ctx, sqlite.Options{Path: *path, Election: *name})
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar reset: --sqlite-path: %v\n", err)
		return 1
	}
	defer func() { _ = b.Close() }()
	msg, err := resetRecord(ctx, b, *bound)
	if err != nil {
		fmt.Fprintf(p.stderr, "sidecar reset: election %q in %s: %v\n", *name, *path, err)
		return 1
	}
	fmt.Fprintf(p.stdout, "election %q in %s: %s\n", *name, *path, msg)
	return 0
}

// resetRecord writes the record back released with its token, after
// waiting out its holder's lease (at most bound) unless it names none, and
// says what it did.
func resetRecord(ctx context.Context, b backend.Backend, bound time.Duration) (string, error) {
	rec, version, err := b.Get(ctx)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return "no record: nothing to reset", nil
	case err != nil:
		return "", err
	}
	if rec.HolderIdentity != "" {
		wait := min(time.Duration(rec.LeaseDurationSeconds)*time.Second, bound)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("stopped while waiting out the lease of holder %q: %w", rec.HolderIdentity, ctx.Err())
		case <-time.After(wait):
		}
	}
	_, err = b.Update(ctx, version, election.ReleaseShape(rec.Transitions, time.Now()))
	switch {
	case errors.Is(err, backend.ErrConflict):
		return "", fmt.Errorf("the record changed while reset waited (holder %q renewed it, or another took it): it is in use; "+
			"stop the election's sidecars first", rec.HolderIdentity)
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("released at token %d (the next leader's token is above it)", rec.Transitions), nil
}
