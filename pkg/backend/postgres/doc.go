// Package postgres is a backend.Backend on one table of a PostgreSQL
// database: leadership across machines without Kubernetes (VMs, Nomad,
// Compose, ECS), with the token in the same database as the data it
// guards. Like every backend it only stores the record; package election
// decides who leads.
//
// # The table
//
// One row per election, keyed by its name, in a table (DefaultTable,
// "leader_records", in the search_path's first schema unless Options say
// otherwise) that Open creates if missing, with the record's fields as
// columns: holder, lease_duration_seconds, acquire_time and renew_time
// (TIMESTAMPTZ, microseconds), transitions (the fencing token), handoff
// (the planned hand-off marker) and group_mark (the shard group's mark),
// as the SQLite backend keeps them. The table is an ordinary logged table,
// never UNLOGGED: an unlogged table is emptied after a crash and not
// replicated, which would restart tokens.
//
// version is an identity column: every INSERT and UPDATE takes the next
// value of the table's sequence, so a version is never issued twice in the
// table. Update is one UPDATE whose WHERE clause names the version read:
// of writers racing from one version, the first to commit changes the row
// and PostgreSQL re-checks the others' WHERE against the row it wrote, so
// they change nothing and get backend.ErrConflict.
//
// Records are never deleted. Triggers refuse a DELETE, a TRUNCATE and an
// UPDATE that renames a row, with a message that says why (a holder may
// still run, and a new record would restart its token). Open puts back a
// trigger dropped or disabled by hand. The table cannot prove that an
// election without a row never had one (a superuser can still remove a row
// with the triggers disabled), so this backend is not a
// backend.FirstCreator: a candidate that finds no record waits one lease
// before it creates one.
//
// Open creates what is missing under an advisory lock, so that many first
// Opens at once do not race. A user who may only read and write the rows
// (SELECT, INSERT, UPDATE on the table, USAGE on its sequence) can run
// against a table that an owner set up already.
//
// # The change signal
//
// A trigger runs pg_notify on Channel after every INSERT and UPDATE, with
// the payload "<schema>.<table> <election>", so a standby that LISTENs
// learns of a release in milliseconds. Each Watch has a connection of its
// own for LISTEN, which a pooler in transaction mode (PgBouncer's
// pool_mode=transaction) cannot give: it hands the listening session to
// other clients, and notifications never arrive. SignalAuto, the default,
// therefore sends a test notification after LISTEN and falls back to
// reading the record's version every PollInterval when it does not arrive
// within ProbeTimeout; SignalPoll polls from the start, SignalNotify never
// falls back. Either way the signal is only a hint (package backend): the
// election still reads the record on its own schedule.
//
// # Time
//
// Expiry is judged, as with every backend, by package election on the
// observer's own monotonic clock: a candidate takes a record over only
// after seeing it unchanged for a lease duration. The server's now() is
// never used: acquire_time and renew_time are the writers' clocks, kept
// for people to read, so a jump of the server's or of a writer's clock
// cannot shorten a lease.
//
// # What it requires of PostgreSQL
//
// PostgreSQL 11 or later (EXECUTE FUNCTION in triggers), and that a
// committed write is not lost. A crash and restart of the server loses
// nothing committed with synchronous_commit on. A failover to an
// asynchronous replica can: the promoted replica may lack the last writes,
// so a record can go back to an earlier holder and token, and the next
// acquire then issues a token that was already claimed, and two leaders
// can briefly both believe they lead. Run the table on a server whose
// commits are synchronously replicated (synchronous_standby_names with
// synchronous_commit = on or remote_apply) if a failover must not repeat
// tokens; otherwise that is the documented risk of a failover, as it is
// of restoring etcd from a backup. A resource that checks tokens (package
// fence) refuses a token lower than one it saw, so a repeated token is
// accepted only by a resource that never saw the higher one.
//
// # Connections and the password
//
// Options.URL is a postgres:// URL or libpq's keyword/value form; what it
// leaves out comes from the PG* environment variables and the password
// file, as with libpq. Errors and Describe name the user, host, port,
// database and table, never the password: Open's errors drop the
// connection string, and any error whose text would hold the password has
// it replaced.
package postgres
