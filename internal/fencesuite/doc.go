// Package fencesuite holds the tests of package fence (its own Go module,
// pkg/fence, with the standard library only) that need this module: the
// client against the sidecar's real app API (pkg/httpapi) on a scripted
// elector, and the SQL guard on SQLite (modernc.org/sqlite) and on a
// throwaway PostgreSQL server (pgx), with goroutine-leak checks. The fence
// module's own tests (cd pkg/fence && go test ./...) need nothing else.
package fencesuite
