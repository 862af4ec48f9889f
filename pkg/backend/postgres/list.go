package postgres

import (
	"context"
	"fmt"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// List implements backend.Lister over every election in the table, not
// only the one this handle was opened on, in one statement (a consistent
// snapshot), sorted by name byte by byte.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Listed, error) {
	rows, err := b.t.pool.query(ctx, `SELECT name, `+columns+` FROM `+b.t.table+`
	WHERE left(name, length($1)) = $1 ORDER BY name COLLATE "C"`, text(prefix))
	if err != nil {
		return nil, b.fail("list", err)
	}
	all, err := listed(rows)
	if err != nil {
		return nil, b.fail("list", err)
	}
	return all, nil
}

// listed is rows of name and columns, as List and ReadAll select them.
func listed(rows [][][]byte) ([]backend.Listed, error) {
	all := make([]backend.Listed, 0, len(rows))
	for _, row := range rows {
		rec, v, err := scan(row[1:])
		if err != nil {
			return nil, fmt.Errorf("election %q: %w", row[0], err)
		}
		all = append(all, backend.Listed{Name: string(row[0]), Record: rec, Version: v})
	}
	return all, nil
}
