package httpapi

import (
	"slices"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// shardEvents are the typed events of /shards/watch that lead from the
// shards held in one state sent (prev) to the next (next), both sorted by
// shard: by shard number, for each shard whose term here changed,
//
//   - released or lost for a term of prev that next does not hold with
//     the same token: released if released(shard) is its token (this
//     replica let it go), else lost (it lapsed, or another holder took
//     the record);
//   - acquired for a term of next that prev did not hold with the same
//     token, then draining if it already drains;
//   - draining or undrained for a term in both whose state changed;
//   - renewed for a term in both, in the same state, valid until later.
//
// A shard whose token changed between two states sends the end of the old
// term before the start of the new one.
func shardEvents(prev, next []ShardJSON, released func(shard int) int64) []ShardEventJSON {
	var out []ShardEventJSON
	was := make(map[int]ShardJSON, len(prev))
	for _, h := range prev {
		was[h.Shard] = h
	}
	is := make(map[int]ShardJSON, len(next))
	for _, h := range next {
		is[h.Shard] = h
	}
	shards := make([]int, 0, len(prev)+len(next))
	for _, h := range prev {
		shards = append(shards, h.Shard)
	}
	for _, h := range next {
		if _, ok := was[h.Shard]; !ok {
			shards = append(shards, h.Shard)
		}
	}
	slices.Sort(shards)
	for _, i := range shards {
		old, had := was[i]
		cur, has := is[i]
		if had && (!has || cur.Token != old.Token) {
			end := fence.ShardEventJSON{Event: fence.EventLost, ShardJSON: old}
			if released(i) == old.Token {
				end.Event = fence.EventReleased
			}
			end.State = end.Event
			out = append(out, end)
		}
		switch {
		case !has:
		case !had || cur.Token != old.Token:
			acquired := cur
			acquired.State = fence.ShardHeld
			out = append(out, fence.ShardEventJSON{Event: fence.EventAcquired, ShardJSON: acquired})
			if cur.State == fence.ShardDraining {
				out = append(out, fence.ShardEventJSON{Event: fence.EventDraining, ShardJSON: cur})
			}
		case cur.State != old.State && cur.State == fence.ShardDraining:
			out = append(out, fence.ShardEventJSON{Event: fence.EventDraining, ShardJSON: cur})
		case cur.State != old.State:
			out = append(out, fence.ShardEventJSON{Event: fence.EventUndrained, ShardJSON: cur})
		case cur.ValidUntil.After(old.ValidUntil):
			out = append(out, fence.ShardEventJSON{Event: fence.EventRenewed, ShardJSON: cur})
		}
	}
	return out
}
