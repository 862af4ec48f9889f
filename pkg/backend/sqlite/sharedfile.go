package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// ownTables are the tables this backend makes, in every release.
var ownTables = []string{"leader_records", "leader_versions", "leader_deletes_refused"}

// foreignShown is how many tables of others the refusal names.
const foreignShown = 3

// checkNotShared refuses a file that already holds tables other than this
// backend's own: an application's own database, named by mistake, which
// Open would change for good (its tables and triggers added, the file
// switched to WAL mode). It reads the file through a read-only connection
// of its own, before any connection that could change it opens. A file
// that is missing, empty, or cannot be read this way is left to Open,
// which says what is wrong with it.
func checkNotShared(ctx context.Context, path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+escaped+"?"+url.Values{"mode": {"ro"}}.Encode())
	if err != nil {
		return nil
	}
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil
	}
	defer func() { _ = rows.Close() }()
	var foreign []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil
		}
		if !isOwnTable(name) {
			foreign = append(foreign, name)
		}
	}
	if rows.Err() != nil || len(foreign) == 0 {
		return nil
	}
	var mode string
	_ = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	shown := strings.Join(foreign[:min(len(foreign), foreignShown)], ", ")
	if len(foreign) > foreignShown {
		shown += fmt.Sprintf(" and %d more", len(foreign)-foreignShown)
	}
	return fmt.Errorf("sqlite: open %s: the file holds tables of others (%s): it looks like an application's own database. "+
		"The sidecar would add its tables (%s) and triggers to it, and switch it from journal mode %q to WAL for good. "+
		"Give the sidecar a file of its own, or say the file is shared on purpose (Options.SharedFile, the sidecar's --sqlite-shared-file)",
		path, shown, strings.Join(ownTables, ", "), mode)
}

func isOwnTable(name string) bool {
	for _, own := range ownTables {
		if strings.EqualFold(name, own) {
			return true
		}
	}
	return false
}
