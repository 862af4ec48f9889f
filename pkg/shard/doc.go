// Package shard is the arithmetic of a shard group: N shards, each an
// election of its own, spread over the replicas that are members of the
// group. It is pure: no store, no clock, no goroutine. It answers three
// questions, each the same for every replica that asks with the same
// input:
//
// Which keys does a shard cover? (ranges.go) Shard i of N covers the keys
// whose 64-bit FNV-1a hash h has i*2^64/N <= h < (i+1)*2^64/N. Every key
// falls in exactly one shard (Of, OfKey), and the ranges are written as
// Kubernetes' server-side sharded list and watch wants its bounds
// (lowercase, 0x, 16 hexadecimal digits, 0x10000000000000000 as the last
// end), so an application can pass the ranges it holds to a sharded
// watch unchanged (Selector).
//
// Which member should hold a shard? (assign.go) Assign computes a table
// from the set of members alone, by rendezvous hashing with bounded load:
// every shard is given to exactly one member, every member gets
// floor(N/M) or ceil(N/M) shards of N over M members, the order in which
// members are listed does not matter, and a member joining or leaving
// moves few shards besides the ones it takes or gives up.
//
// What does a replica do next? (decide.go) Decide turns one replica's
// view (the live members, each shard's holder and state) into actions:
// acquire its target shards that are free or expired, drain the shards it
// holds that belong to another member, release a drained shard once its
// application acknowledged it or a drain timeout passed. It never asks to
// take a shard that another holder holds live: a move waits until the
// holder releases it or its claim expires, so replicas whose views
// disagree may delay a move but never make two holders. That a shard has
// at most one holder at any instant is the election's guarantee (package
// election), which every shard keeps on its own record; Decide only
// chooses which elections a replica takes part in.
//
// Package shardgroup runs it in the sidecar's shard mode (--shards);
// docs/shards.md says what is built and what is not.
package shard
