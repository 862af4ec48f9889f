package shard_test

import (
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/shard"
)

// The ranges of 3 shards, and the selector for a replica that holds
// shards 1 and 2, ready for a sharded list or watch.
func ExampleSelector() {
	var held []shard.Range
	for i := range 3 {
		r, _ := shard.RangeOf(i, 3)
		fmt.Printf("shard %d: [%s, %s)\n", i, r.StartText(), r.EndText())
		if i > 0 {
			held = append(held, r)
		}
	}
	selector, _ := shard.Selector(shard.FieldUID, held)
	fmt.Println(selector)
	fmt.Println("a key of shard", shard.OfKey("0e4b3c6a-5d2f-4e1b-9a7c-8f3e2d1c0b9a", 3))
	// Output:
	// shard 0: [0x0000000000000000, 0x5555555555555556)
	// shard 1: [0x5555555555555556, 0xaaaaaaaaaaaaaaab)
	// shard 2: [0xaaaaaaaaaaaaaaab, 0x10000000000000000)
	// shardRange(object.metadata.uid, '0x5555555555555556', '0x10000000000000000')
	// a key of shard 0
}

// 8 shards over 3 replicas: each gets 2 or 3, whatever order they are
// listed in.
func ExampleAssign() {
	table, _ := shard.Assign(8, []string{"app-2", "app-0", "app-1"})
	load := table.Load()
	fmt.Println("fair share", shard.FairShare(8, 3))
	for _, m := range []string{"app-0", "app-1", "app-2"} {
		fmt.Println(m, load[m] >= 2 && load[m] <= 3)
	}
	same, _ := shard.Assign(8, []string{"app-0", "app-1", "app-2"})
	fmt.Println("same table:", fmt.Sprint(same) == fmt.Sprint(table))
	// Output:
	// fair share 3
	// app-0 true
	// app-1 true
	// app-2 true
	// same table: true
}
