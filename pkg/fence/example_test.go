package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// The client examples run against a stand-in that answers as the sidecar
// does. In a Pod, the sidecar is at fence.DefaultBaseURL: fence.NewClient("").

func ExampleClient_State() {
	sidecar := newStubSidecar(leaderJSON("app-0_1", 3, time.Minute))
	defer sidecar.Close()

	c, err := fence.NewClient(sidecar.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()

	// Before each unit of exclusive work: an error means "not leader".
	s, err := c.State(context.Background())
	if err != nil || !s.Leader {
		fmt.Println("not leader: skip the work")
		return
	}
	fmt.Println("leader; attach token", s.Token, "to every write")
	// Output: leader; attach token 3 to every write
}

func ExampleClient_WaitForLeadership() {
	sidecar := newStubSidecar(followerJSON("app-0_1", "app-1_2"))
	defer sidecar.Close()
	c, err := fence.NewClient(sidecar.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()
	go sidecar.Set(leaderJSON("app-0_1", 4, time.Minute)) // meanwhile, this replica wins

	term, err := c.WaitForLeadership(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer term.Close()
	fmt.Println("leading with token", term.Token())

	// The resource checks the term (token and holder) with each write.
	var billing fence.MemoryGuard
	err = billing.Do("nightly-run", term.ID(), func() error { return nil })
	fmt.Println("write with token 4:", err)

	// The sidecar steps down (its renewals failed, say): the term ends at once.
	sidecar.Set(followerJSON("app-0_1", ""))
	<-term.Done()
	fmt.Println("term over:", errors.Is(term.Err(), fence.ErrLeadershipLost))

	// A newer leader writes; a late write of this term is refused.
	_ = billing.Do("nightly-run", fence.TermID{Token: 5, Holder: "app-1_2"}, func() error { return nil })
	err = billing.Do("nightly-run", term.ID(), func() error { return nil })
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStaleToken))
	// Output:
	// leading with token 4
	// write with token 4: <nil>
	// term over: true
	// late write refused: true
}

func ExampleMemoryGuard() {
	var cache fence.MemoryGuard
	warm := func(term fence.TermID) error {
		return cache.Do("cache", term, func() error {
			fmt.Println("warming with", term)
			return nil
		})
	}
	fmt.Println(warm(fence.TermID{Token: 7, Holder: "web-1_a"}))
	fmt.Println(warm(fence.TermID{Token: 7, Holder: "web-1_a"})) // the same term again
	fmt.Println(errors.Is(warm(fence.TermID{Token: 6, Holder: "web-2_b"}), fence.ErrStaleToken))
	fmt.Println(errors.Is(warm(fence.TermID{Token: 7, Holder: "web-2_b"}), fence.ErrTokenReused))
	// Output:
	// warming with token 7 of "web-1_a"
	// <nil>
	// warming with token 7 of "web-1_a"
	// <nil>
	// true
	// true
}

func ExampleClient_ShardTerms() {
	sidecar := startStubShards() // a sidecar in shard mode (--shards 4), group billing
	defer sidecar.Close()
	c, err := fence.NewClient(sidecar.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	terms, err := c.ShardTerms(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer terms.Close()
	stream := <-sidecar.streams
	stream.out <- typedEvent(fence.EventAcquired, 2, 7) + shardsState(held(2, 7, fence.ShardHeld)) // this replica takes shard 2

	term, err := terms.Next(ctx) // in an application: one goroutine per term
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("shard", term.Shard(), "token", term.Token(), "resource", term.ID().Resource())

	// Each write of the shard's data presents the shard's term.
	var guard fence.MemoryGuard
	err = guard.DoShard(term.ID(), func() error { return nil })
	fmt.Println("write:", err)

	// The sidecar drains the shard (another replica is to take it).
	stream.out <- typedEvent(fence.EventDraining, 2, 7) + shardsState(held(2, 7, fence.ShardDraining))
	<-term.Done()
	fmt.Println("draining:", errors.Is(term.Err(), fence.ErrShardDraining))
	// Once the shard's work has stopped, let it go.
	fmt.Println("acknowledged:", c.Drained(ctx, term.ID()))
	// Output:
	// shard 2 token 7 resource billing/4/shard-2
	// write: <nil>
	// draining: true
	// acknowledged: <nil>
}
