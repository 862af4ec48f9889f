package backend

import (
	"encoding/json"
	"fmt"
)

// GroupMark is the mark of a record of a shard group (package
// shardgroup): the shard count of the replica that wrote it, and on a
// member record whether that replica yields to another count. The zero
// value means none: a record of a single election, or one written by a
// release that did not mark records. Backends store it as they find it;
// only package shardgroup gives it meaning. Not part of client-go's
// record: the Lease backend keeps it in an annotation, which client-go's
// writes leave as they find it.
type GroupMark struct {
	// Shards is the shard count (--shards) of the replica that wrote the
	// record; 0 for none.
	Shards int
	// Yielded, on a member record, says that its replica holds no shard
	// and contends for none, because it sees a replica of a larger count.
	Yielded bool
	// Leaving, on a member record, says that its replica is stopping: it
	// contends for nothing and drains what it holds; it writes its record
	// with no holder once it holds nothing.
	Leaving bool
}

// IsZero reports whether m is no mark at all.
func (m GroupMark) IsZero() bool { return m == GroupMark{} }

// check returns an error if m is not a mark a shard group writes.
func (m GroupMark) check() error {
	if m.Shards < 0 || m.Shards > MaxTransitions || m.Shards == 0 && (m.Yielded || m.Leaving) {
		return fmt.Errorf("group mark %+v: shard count out of range [1, %d]", m, MaxTransitions)
	}
	return nil
}

// groupMarkJSON is the stored form of a mark: compact JSON.
type groupMarkJSON struct {
	Shards  int  `json:"shards"`
	Yielded bool `json:"yielded,omitempty"`
	Leaving bool `json:"leaving,omitempty"`
}

// EncodeGroupMark is the text a backend stores for m: "" for no mark,
// else compact JSON such as {"shards":4}, {"shards":2,"yielded":true} or
// {"shards":4,"leaving":true}.
func EncodeGroupMark(m GroupMark) string {
	if m.IsZero() {
		return ""
	}
	b, err := json.Marshal(groupMarkJSON(m))
	if err != nil { // an int and a bool always encode
		return ""
	}
	return string(b)
}

// DecodeGroupMark reads what EncodeGroupMark wrote. Text that is empty,
// not such JSON, or not a mark a group writes (edited by hand, say) reads
// as no mark, which a shard group treats as a count of its own, never as
// its own count (package shardgroup): a garbled mark can delay a group,
// never let two counts hold the same keys.
func DecodeGroupMark(text string) GroupMark {
	if text == "" {
		return GroupMark{}
	}
	var j groupMarkJSON
	if err := json.Unmarshal([]byte(text), &j); err != nil {
		return GroupMark{}
	}
	m := GroupMark(j)
	if m.check() != nil {
		return GroupMark{}
	}
	return m
}
