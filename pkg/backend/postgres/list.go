package postgres

import (
	"context"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// List implements backend.Lister over every election in the table, not
// only the one this handle was opened on, in one statement (a consistent
// snapshot), sorted by name byte by byte.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	rows, err := b.pool.Query(ctx, `SELECT name, `+columns+` FROM `+b.table+`
	WHERE left(name, length($1)) = $1 ORDER BY name COLLATE "C"`, prefix)
	if err != nil {
		return nil, b.fail("list", err)
	}
	defer rows.Close()
	var all []backend.Listed
	for rows.Next() {
		var name string
		rec, v, err := scan(rows, &name)
		if err != nil {
			return nil, b.fail("list", err)
		}
		all = append(all, backend.Listed{Name: name, Record: rec, Version: v})
	}
	if err := rows.Err(); err != nil {
		return nil, b.fail("list", err)
	}
	return all, nil
}
