package fence

import "time"

// ShardsJSON is the JSON body of the sidecar's GET /shards in shard mode
// (--shards N), and of every unnamed event of GET /shards/watch. Like
// LeaderJSON it is the one definition of that JSON: the sidecar writes it,
// Client.Shards, Client.ShardTerms and the sidecar's tests read it, and a
// reader must ignore fields it does not know.
//
// Example, from one replica of four shards:
//
//	{"group":"billing","identity":"web-0_4a5f…","shards":4,"members":["web-0_4a5f…"],"fairShare":4,"leaving":false,
//	 "held":[{"shard":0,"token":1,"state":"held","range":{"start":"0x0000000000000000","end":"0x4000000000000000"},
//	          "validUntil":"2026-12-02T19:00:05.1Z"}, …],
//	 "shardSelector":"shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"}
type ShardsJSON struct {
	// Group names the shard group (--shard-group).
	Group string `json:"group"`
	// Identity is the sidecar's candidate identity, new at every start;
	// with a shard's token it names a term of that shard (ShardTermID).
	Identity string `json:"identity"`
	// Shards is the number of shards of the group, numbered from 0.
	Shards int `json:"shards"`
	// Members are the live members this replica sees, sorted.
	Members []string `json:"members"`
	// FairShare is ceil(shards/members), the most shards a member holds
	// once the group has settled.
	FairShare int `json:"fairShare"`
	// Leaving is set once the sidecar began a graceful stop.
	Leaving bool `json:"leaving"`
	// Held are the shards this replica claims now, by number; [] when none.
	Held []ShardJSON `json:"held"`
	// ShardSelector selects the objects whose UID falls in the held
	// ranges, in the API server's shardSelector grammar; "" when nothing
	// is held (an empty selector would select everything).
	ShardSelector string `json:"shardSelector"`
}

// The states of a shard held here (ShardJSON.State), and the names of the
// typed events of GET /shards/watch (ShardEventJSON.Event).
const (
	// ShardHeld is the state of a shard this replica claims and works on.
	ShardHeld = "held"
	// ShardDraining is the state of a shard this replica still claims,
	// with its token, but is giving up: the application is to stop working
	// on it and acknowledge with POST /shards/{i}/drained.
	ShardDraining = "draining"

	// EventAcquired: a term of a shard began here (a shard held with a
	// token the stream had not shown held here).
	EventAcquired = "acquired"
	// EventDraining: a shard held here began to drain.
	EventDraining = "draining"
	// EventUndrained: a shard that drained here is kept after all (its
	// drain was not acknowledged yet); same token.
	EventUndrained = "undrained"
	// EventRenewed: the claim of a shard held here was renewed: a later
	// validUntil, same token and state. Renewals change no state, so this
	// is the only event that says how long a term lasts now.
	EventRenewed = "renewed"
	// EventReleased: this replica released the shard's term (after the
	// drain was acknowledged or timed out, or on a graceful stop).
	EventReleased = "released"
	// EventLost: the shard's term ended here without a release: the claim
	// lapsed (no renewal within the renew deadline) or the record names
	// another holder.
	EventLost = "lost"
)

// ShardJSON is a shard held here, in ShardsJSON.Held, and the answer of
// GET /shards/{i} while it is held here.
type ShardJSON struct {
	Shard int `json:"shard"`
	// Token is the fencing token of this replica's term on the shard (>= 1).
	Token int64 `json:"token"`
	// State is ShardHeld or ShardDraining.
	State string `json:"state"`
	// Range is the shard's range of FNV-1a 64 hashes of keys.
	Range RangeJSON `json:"range"`
	// ValidUntil is when this claim ends unless renewed first, on the
	// sidecar's wall clock.
	ValidUntil time.Time `json:"validUntil"`
}

// RangeJSON is a shard's range of FNV-1a 64 hashes, [start, end), written
// as the API server's shardSelector takes them: "0x" and 16 lowercase
// hexadecimal digits, "0x10000000000000000" for the end of the last shard.
type RangeJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// ShardEventJSON is the data of a named event of GET /shards/watch: one
// change of one shard's term here. Its SSE event name is Event too.
//
//	event: acquired
//	data: {"event":"acquired","shard":3,"token":5,"state":"held","range":{…},"validUntil":"…"}
//
// For EventAcquired, EventDraining, EventUndrained and EventRenewed the
// fields are the shard as it is now held; for EventReleased and EventLost they are the
// term that ended, as last sent (State is then "released" or "lost").
type ShardEventJSON struct {
	Event string `json:"event"`
	ShardJSON
}
