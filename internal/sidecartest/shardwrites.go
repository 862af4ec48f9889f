package sidecartest

import (
	"context"
	"database/sql"
)

// ShardWrite is a row of shard_writes, the log examples/worker --shards
// keeps in its results file of every write the per-shard guard accepted,
// in commit order.
type ShardWrite struct {
	Resource, Holder string
	Token            int64
}

// ReadShardWrites reads the log of accepted writes from the workers'
// results file, in commit order.
func ReadShardWrites(ctx context.Context, results string) ([]ShardWrite, error) {
	db, err := sql.Open("sqlite", results+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT resource, token, holder FROM shard_writes ORDER BY rowid")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ShardWrite
	for rows.Next() {
		var w ShardWrite
		if err := rows.Scan(&w.Resource, &w.Token, &w.Holder); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// StaleShardWritesAccepted counts the accepted writes that did not follow
// the last accepted write of their shard: a lower token, or the same token
// from another holder. It also returns each shard's last accepted write.
func StaleShardWritesAccepted(writes []ShardWrite) (stale int, last map[string]ShardWrite) {
	last = map[string]ShardWrite{}
	for _, w := range writes {
		if prev, ok := last[w.Resource]; ok && (w.Token < prev.Token || (w.Token == prev.Token && w.Holder != prev.Holder)) {
			stale++
			continue
		}
		last[w.Resource] = w
	}
	return stale, last
}
