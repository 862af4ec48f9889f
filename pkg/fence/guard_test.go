package fence_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

func TestMemoryGuard(t *testing.T) {
	var g fence.MemoryGuard // the zero value is ready
	value := ""
	write := func(token int64, v string) error {
		return g.Do("billing", token, func() error { value = v; return nil })
	}
	steps := []struct {
		token int64
		value string
		want  error
	}{
		{3, "first", nil},
		{5, "higher", nil},
		{5, "equal", nil},
		{4, "lower", fence.ErrStaleToken},
		{-1, "negative", fence.ErrInvalidToken},
		{0, "zero", fence.ErrStaleToken},
	}
	for _, s := range steps {
		if err := write(s.token, s.value); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("token %d: %v, want %v", s.token, err, s.want)
		}
	}
	if highest, ok := g.Highest("billing"); value != "equal" || highest != 5 || !ok {
		t.Fatalf("value %q, highest %d %v; want %q 5", value, highest, ok, "equal")
	}
	if err := g.Do("reports", 1, func() error { return nil }); err != nil {
		t.Fatalf("another resource: %v", err)
	}
}

func TestMemoryGuardDoesNotRecordAFailedWrite(t *testing.T) {
	g := fence.NewMemoryGuard()
	boom := errors.New("disk full")
	if err := g.Do("billing", 9, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the write's error", err)
	}
	if _, ok := g.Highest("billing"); ok {
		t.Fatal("a failed write recorded its token")
	}
	if err := g.Do("billing", 2, func() error { return nil }); err != nil {
		t.Fatalf("token 2 after a failed 9: %v", err)
	}
}

// Concurrent writers with random tokens: every write that runs has a token
// at least as high as every write that ran before it.
func TestMemoryGuardConcurrent(t *testing.T) {
	g := fence.NewMemoryGuard()
	var ran []int64 // appended inside Do, under the guard's lock
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				token := rand.Int64N(50)
				err := g.Do("billing", token, func() error { ran = append(ran, token); return nil })
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(ran); i++ {
		if ran[i] < ran[i-1] {
			t.Fatalf("write %d ran with token %d after %d", i, ran[i], ran[i-1])
		}
	}
	if highest, _ := g.Highest("billing"); len(ran) == 0 || highest != ran[len(ran)-1] {
		t.Fatalf("highest %d, last write %v", highest, ran[len(ran)-1:])
	}
}
