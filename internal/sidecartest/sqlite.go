package sidecartest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"

	_ "modernc.org/sqlite"
)

// HoldWriteLock takes SQLite's write lock on the election file db from
// this process, as a stuck writer would, until the returned function is
// called.
func HoldWriteLock(t testing.TB, db string) func() {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE leader_records SET name = name WHERE 0"); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(); _ = conn.Close() }
}

// RemoveDatabase removes an SQLite database and SQLite's files beside it
// (-wal, -shm): the next process on path starts a new file, at token 1.
func RemoveDatabase(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
