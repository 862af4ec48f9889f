package fence_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// termOf is the term of the leader with token when tokens never repeat:
// one holder per token.
func termOf(token int64) fence.TermID {
	return fence.TermID{Token: token, Holder: fmt.Sprintf("app-%d_1", token)}
}

// guardSteps are writes to one resource, in order, and what the guard
// must answer each. Both guards are held to them.
var guardSteps = []struct {
	name string
	term fence.TermID
	want error // nil: accepted
}{
	{"first write", termOf(3), nil},
	{"higher token", termOf(5), nil},
	{"same term again", termOf(5), nil},
	{"equal token from another holder", fence.TermID{Token: 5, Holder: "app-5_2"}, fence.ErrTokenReused},
	{"lower token", termOf(4), fence.ErrStaleToken},
	{"zero token", termOf(0), fence.ErrStaleToken},
	{"negative token", termOf(-1), fence.ErrInvalidToken},
	{"no holder", fence.TermID{Token: 6}, fence.ErrInvalidToken},
	{"the first holder again", termOf(5), nil},
	{"the other holder with a higher token", fence.TermID{Token: 6, Holder: "app-5_2"}, nil},
	{"the first holder, now behind", termOf(5), fence.ErrStaleToken},
}

// checkGuardAnswer fails unless err is what step wants: nil, or its error
// and, for a refusal, the right kind of refusal naming both terms' holders.
func checkGuardAnswer(t *testing.T, err error, term fence.TermID, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%v refused: %v", term, err)
	case !errors.Is(err, want):
		t.Fatalf("%v: %v, want %v", term, err, want)
	case errors.Is(want, fence.ErrStaleToken) && errors.Is(err, fence.ErrTokenReused) != (want == fence.ErrTokenReused):
		t.Fatalf("%v: %v; want ErrTokenReused exactly for an equal token", term, err)
	case errors.Is(want, fence.ErrStaleToken) && !strings.Contains(err.Error(), term.Holder):
		t.Fatalf("%v: %q does not name the refused holder", term, err)
	}
}

func TestMemoryGuard(t *testing.T) {
	var g fence.MemoryGuard // the zero value is ready
	value := fence.TermID{}
	var last fence.TermID // the last accepted
	for _, s := range guardSteps {
		t.Run(s.name, func(t *testing.T) {
			err := g.Do("billing", s.term, func() error { value = s.term; return nil })
			checkGuardAnswer(t, err, s.term, s.want)
			if s.want == nil {
				last = s.term
			}
			if accepted, ok := g.Accepted("billing"); value != last || accepted != last || !ok {
				t.Fatalf("value written by %v, accepted %v %v; want %v", value, accepted, ok, last)
			}
			if s.want == fence.ErrTokenReused && !strings.Contains(err.Error(), last.Holder) {
				t.Fatalf("%q does not name the holder that has the token", err)
			}
		})
	}
	if err := g.Do("reports", termOf(1), func() error { return nil }); err != nil {
		t.Fatalf("another resource: %v", err)
	}
}

func TestMemoryGuardDoesNotRecordAFailedWrite(t *testing.T) {
	g := fence.NewMemoryGuard()
	boom := errors.New("disk full")
	if err := g.Do("billing", termOf(9), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the write's error", err)
	}
	if _, ok := g.Accepted("billing"); ok {
		t.Fatal("a failed write recorded its term")
	}
	if err := g.Do("billing", termOf(2), func() error { return nil }); err != nil {
		t.Fatalf("token 2 after a failed 9: %v", err)
	}
}

// Concurrent writers with random tokens from two holders that reuse them:
// every write that runs follows the one that ran before it.
func TestMemoryGuardConcurrent(t *testing.T) {
	g := fence.NewMemoryGuard()
	var ran []fence.TermID // appended inside Do, under the guard's lock
	var wg sync.WaitGroup
	for i := range 8 {
		holder := fmt.Sprintf("app-%d_1", i%2)
		wg.Go(func() {
			for range 200 {
				term := fence.TermID{Token: rand.Int64N(50), Holder: holder}
				err := g.Do("billing", term, func() error { ran = append(ran, term); return nil })
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(ran); i++ {
		prev, cur := ran[i-1], ran[i]
		if cur.Token < prev.Token || (cur.Token == prev.Token && cur.Holder != prev.Holder) {
			t.Fatalf("write %d ran with %v after %v", i, cur, prev)
		}
	}
	if accepted, _ := g.Accepted("billing"); len(ran) == 0 || accepted != ran[len(ran)-1] {
		t.Fatalf("accepted %v, last write %v", accepted, ran[len(ran)-1:])
	}
}
