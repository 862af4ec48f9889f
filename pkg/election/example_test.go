package election_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// Two candidates share one election on an in-process store, at the default
// timings. The first leads at once (the store proves that no record existed
// before), the second follows it, and when the first releases, the second
// takes over at once with the next token.
func ExampleNew() {
	store := memory.NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := func(pod string) (*election.Elector, <-chan error) {
		e, err := election.New(election.Config{
			Backend:         store.Open("example"),
			Identity:        election.NewIdentity(pod),
			ReleaseOnCancel: true,
			Logger:          slog.New(slog.DiscardHandler),
		})
		if err != nil {
			log.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		return e, done
	}
	// await returns e's status once it satisfies ok.
	await := func(e *election.Elector, ok func(election.Status) bool) election.Status {
		for {
			changed := e.Changed()
			if s := e.Status(); ok(s) {
				return s
			}
			<-changed
		}
	}

	a, aDone := start("pod-0")
	s := await(a, func(s election.Status) bool { return s.Leader })
	fmt.Println("pod-0 leads with token", s.Token)

	b, bDone := start("pod-1")
	s = await(b, func(s election.Status) bool { return s.Holder != "" })
	fmt.Println("pod-1 follows", election.IdentityPrefix(s.Holder))

	if _, err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}
	s = await(b, func(s election.Status) bool { return s.Leader })
	fmt.Println("after the release, pod-1 leads with token", s.Token)

	cancel()
	fmt.Println("Run returned", <-aDone, <-bDone)
	// Output:
	// pod-0 leads with token 1
	// pod-1 follows pod-0
	// after the release, pod-1 leads with token 2
	// Run returned <nil> <nil>
}
