// Package fencesuite holds the tests of package fence (its own Go module,
// pkg/fence, with the standard library only) that need this module: the
// client against the sidecar's real app API (pkg/httpapi) on a scripted
// elector, and the SQL guard on SQLite (modernc.org/sqlite) and on a
// throwaway PostgreSQL server (pgx), with goroutine-leak checks. It also
// runs every guard docs/fencing.md documents, as the page writes it, on a
// real server the tests start: SQLite, PostgreSQL, MariaDB
// (go-sql-driver/mysql), Redis (the Lua script, over RESP) and etcd (the
// transaction, on its JSON gateway), including a split brain between two
// real sidecars (the binary, one frozen with SIGSTOP). The fence module's
// own tests (cd pkg/fence && go test ./...) need nothing else.
package fencesuite
