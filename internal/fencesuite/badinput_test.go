package fencesuite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/fence/fencetest"
)

// The guards and the client with bad input: odd resource names, extreme
// tokens, unusable transactions, a panicking write, and a "sidecar" that
// sends without end. Each ends in a clear error or a defined outcome, never
// a crash, a hang or unbounded memory.

// oddResources are resource names a caller might pass by mistake or design.
var oddResources = map[string]string{
	"empty":         "",
	"1 MiB":         strings.Repeat("r", 1<<20),
	"unicode":       "счёт/账户/β-💶",
	"spaces":        "  billing  ",
	"SQL-looking":   "billing'; DROP TABLE fence_tokens; --",
	"control chars": "bill\ning\t\r",
}

func TestBadInputMemoryGuardResourcesAndTokens(t *testing.T) {
	g := fence.NewMemoryGuard()
	for name, resource := range oddResources {
		t.Run(name, func(t *testing.T) {
			ran := 0
			write := func() error { ran++; return nil }
			if err := g.Do(resource, fencetest.Term(math.MaxInt64), write); err != nil || ran != 1 {
				t.Fatalf("token MaxInt64: %v (ran %d)", err, ran)
			}
			if err := g.Do(resource, fencetest.Term(math.MaxInt64), write); err != nil || ran != 2 {
				t.Fatalf("token MaxInt64 again: %v (ran %d)", err, ran)
			}
			err := g.Do(resource, fencetest.Term(math.MaxInt64-1), write)
			if !errors.Is(err, fence.ErrStaleToken) || ran != 2 {
				t.Fatalf("token MaxInt64-1 after MaxInt64: %.200v (ran %d), want ErrStaleToken", err, ran)
			}
			for _, tok := range []int64{-1, math.MinInt64} {
				if err := g.Do(resource, fencetest.Term(tok), write); !errors.Is(err, fence.ErrInvalidToken) || ran != 2 {
					t.Fatalf("token %d: %v (ran %d), want ErrInvalidToken", tok, err, ran)
				}
			}
			if a, ok := g.Accepted(resource); !ok || a != fencetest.Term(math.MaxInt64) {
				t.Fatalf("Accepted = %v %v, want %v", a, ok, fencetest.Term(math.MaxInt64))
			}
		})
	}
	// Each name is its own resource: none of the writes above touched these.
	for _, other := range []string{"billing", " ", "r"} {
		if _, ok := g.Accepted(other); ok {
			t.Fatalf("resource %q has a token it was never written with", other)
		}
		if err := g.Do(other, fencetest.Term(0), func() error { return nil }); err != nil {
			t.Fatalf("token 0 on the untouched resource %q: %v", other, err)
		}
	}
}

// A write that panics: the guard does not recover it (a panic is the
// caller's bug, and swallowing it would hide a half-done write), but it
// records nothing and releases its lock, so the guard stays usable.
func TestBadInputMemoryGuardPanickingWrite(t *testing.T) {
	g := fence.NewMemoryGuard()
	if err := g.Do("billing", fencetest.Term(3), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_ = g.Do("billing", fencetest.Term(8), func() error { panic(boom) })
		return nil
	}()
	if recovered != boom {
		t.Fatalf("recovered %v, want the write's own panic value", recovered)
	}
	if a, _ := g.Accepted("billing"); a != fencetest.Term(3) {
		t.Fatalf("a panicking write recorded its term: accepted %v, want %v", a, fencetest.Term(3))
	}
	done := make(chan error, 1)
	go func() { done <- g.Do("billing", fencetest.Term(5), func() error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after a panicking one: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the guard is still locked after a write panicked")
	}
	if a, _ := g.Accepted("billing"); a != fencetest.Term(5) {
		t.Fatalf("accepted %v, want %v", a, fencetest.Term(5))
	}
}

func TestBadInputSQLGuard(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		ctx := t.Context()
		check := func(resource string, token int64) error {
			tx, err := f.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := f.guard.Check(ctx, tx, resource, fencetest.Term(token)); err != nil {
				return err
			}
			return tx.Commit()
		}
		for name, resource := range oddResources {
			t.Run(name, func(t *testing.T) {
				err := check(resource, math.MaxInt64)
				if err != nil {
					// A database may refuse a name (PostgreSQL caps index
					// entries); that must be a plain error, never a stale token.
					if errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrInvalidToken) {
						t.Fatalf("a name the database refused is reported as a token problem: %.300v", err)
					}
					msg := err.Error()
					t.Logf("%s refuses the name (%d-byte error): %.80s ... %s", d.name, len(msg), msg, msg[max(0, len(msg)-160):])
					return
				}
				if err := check(resource, math.MaxInt64); err != nil {
					t.Fatalf("token MaxInt64 again: %.300v", err)
				}
				if err := check(resource, math.MaxInt64-1); !errors.Is(err, fence.ErrStaleToken) {
					t.Fatalf("token MaxInt64-1 after MaxInt64: %.300v, want ErrStaleToken", err)
				}
				if _, term := f.state(t, resource); term != fencetest.Term(math.MaxInt64) {
					t.Fatalf("stored %v, want %v", term, fencetest.Term(math.MaxInt64))
				}
			})
		}
		// Bytes a database may refuse in text: an error, and the guard works on.
		for _, resource := range []string{"\xff\xfe", "nul\x00byte"} {
			if err := check(resource, 1); err != nil && (errors.Is(err, fence.ErrStaleToken) || errors.Is(err, fence.ErrInvalidToken)) {
				t.Fatalf("resource %q: %v", resource, err)
			} else {
				t.Logf("resource %q on %s: %v", resource, d.name, err)
			}
		}
		for _, tok := range []int64{-1, math.MinInt64} {
			if err := check("billing", tok); !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("token %d: %v, want ErrInvalidToken", tok, err)
			}
		}
		if err := f.guard.Check(ctx, nil, "billing", fencetest.Term(1)); err == nil || !strings.Contains(err.Error(), "transaction") {
			t.Fatalf("nil transaction: %v, want an error naming the transaction", err)
		}
		for _, end := range []string{"commit", "rollback"} {
			tx, err := f.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if end == "commit" {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := f.guard.Check(ctx, tx, "billing", fencetest.Term(1)); !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("Check in a transaction after %s: %v, want sql.ErrTxDone", end, err)
			}
		}
		if _, term := f.state(t, "billing"); term != (fence.TermID{}) {
			t.Fatalf("rejected checks recorded %v", term)
		}
		f.mustWrite(t, "billing", fencetest.Term(2), "still works")
	})
}

// endless answers every request with prefix, then unit repeated without
// end (up to limit bytes, so that a client that never stops reading fails
// the test instead of hanging it), counting what the client took.
type endless struct {
	prefix, unit string
	limit        int64
	written      atomic.Int64
}

func (e *endless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := "text/event-stream"
	if r.URL.Path == "/leader" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	n, err := fmt.Fprint(w, e.prefix)
	e.written.Add(int64(n))
	unit := []byte(strings.Repeat(e.unit, max(1, (8<<10)/len(e.unit))))
	for err == nil && e.written.Load() < e.limit {
		n, err = w.Write(unit)
		e.written.Add(int64(n))
	}
}

// The client reads at most a bounded amount of an answer or event, however
// long the sidecar goes on: maxBody (64 KiB) and the reader's buffers. The
// in-process transport is an unbuffered pipe, so what the server wrote is
// what the client read.
func TestBadInputClientBoundsEndlessStreams(t *testing.T) {
	const limit = 64 << 20
	const bound = 1 << 20
	watches := map[string]*endless{
		"one line without end":              {prefix: "data: ", unit: "x"},
		"data lines without a blank line":   {prefix: "", unit: "data: " + strings.Repeat("y", 1000) + "\n"},
		"one data line per character":       {prefix: ": hi\n\n", unit: "data:z\n"},
		"continuation after a valid prefix": {prefix: `data: {"leader":false}` + "\n", unit: "data: ,\n"},
	}
	for name, e := range watches {
		t.Run("watch/"+name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e.limit = limit
				sc := newScriptedSidecar(t, nil, e)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				states, err := sc.client.Watch(ctx)
				if err != nil {
					t.Fatal(err)
				}
				s := receive(t, states)
				written := e.written.Load()
				if s.Leader || !errors.Is(s.Err, fence.ErrDisconnected) || !errors.Is(s.Err, fence.ErrBadResponse) {
					t.Fatalf("after %d bytes: state %+v, want a disconnected ErrBadResponse", written, s)
				}
				if written > bound {
					t.Fatalf("the client took %d bytes of an endless event before giving up, want at most %d", written, bound)
				}
				t.Logf("gave up after %d KiB: %v", written>>10, s.Err)
			})
		})
	}
	t.Run("state/endless answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := &endless{prefix: `{"leader":false,"holder":"`, unit: "h", limit: limit}
			sc := newScriptedSidecar(t, nil, e)
			_, err := sc.client.State(t.Context())
			if written := e.written.Load(); !errors.Is(err, fence.ErrBadResponse) || written > bound {
				t.Fatalf("State after %d bytes: %v, want ErrBadResponse within %d bytes", written, err, bound)
			}
		})
	})
}

func TestErrorsDoNotRepeatAHugeResourceName(t *testing.T) {
	huge := strings.Repeat("r", 1<<20)
	var g fence.MemoryGuard
	if err := g.Do(huge, fencetest.Term(5), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	err := g.Do(huge, fencetest.Term(4), func() error { return nil })
	if !errors.Is(err, fence.ErrStaleToken) || len(err.Error()) > 512 || !strings.Contains(err.Error(), "1048576 bytes") {
		t.Fatalf("stale-token error of %d bytes: %.200q", len(err.Error()), err)
	}
}
