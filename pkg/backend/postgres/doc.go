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
// learns of a release in milliseconds. The Watches of a Table's handles
// share one connection for LISTEN, opened while any of them runs, which a
// pooler in transaction mode (PgBouncer's pool_mode=transaction) cannot
// give: it hands the listening session to other clients, and
// notifications never arrive. SignalAuto, the default, therefore sends a
// test notification after LISTEN and falls back to reading the watched
// records' versions, in one statement, every PollInterval when it does
// not arrive within ProbeTimeout; SignalPoll polls from the start,
// SignalNotify never falls back. Either way the signal is only a hint (package backend): the
// election still reads the record on its own schedule.
//
// # Connections of a shard group
//
// Open gives a handle on one election that owns its connections: a pool
// of at most three and, while it watches, one listening connection.
// OpenTable gives the same connections for a whole table, and its Election
// handles on as many records as a shard group has (its shard records and
// member records) share them: a replica of N shards opens at most four
// connections, not 4N. Each handle's Get, Create and Update are the
// single election's statements on its own row, so the compare-and-swap
// and the group mark (group_mark) are the same on every record.
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
// write it was told is committed is never lost, by a crash or by a
// failover: a token is handed out twice only when the store forgets a term
// that a holder began.
//
// Every record write (Create, Update) commits with synchronous_commit at
// least on: in the same round trip and the same transaction it runs
// set_config('synchronous_commit', 'on', true) unless the session has on
// or remote_apply already, whatever the server's, database's or role's
// default. So a crash and restart loses no acknowledged write, and where
// synchronous_standby_names names standbys, a write is acknowledged only
// once the synchronous standbys have flushed it: an acquire that a
// candidate was told of, and claims, is on them. A promotion replays all
// the WAL a standby received, even one whose replay was paused, so a
// failover to a synchronous standby keeps every term that began. While no
// synchronous standby answers, writes wait: no term starts or is renewed,
// and the leader stops claiming at its renew deadline; the write lands
// once a standby is back.
//
// What the backend requires for failover, then: promote only a standby
// that synchronous_standby_names names (with ANY or FIRST n, the one that
// has the most WAL), as Patroni's synchronous_mode does. A failover to an
// asynchronous standby can lose the last writes: the promoted server's
// record may name an earlier holder and token. Candidates still running
// that saw the lost token continue above it (package election), but one
// that never saw it (started after the failover, or that missed the
// write) issues that token again, to another holder: two holders then have one token, and
// for a moment both can believe they lead. Open warns in the log when the
// server streams to standbys none of which is synchronous
// (pg_stat_replication has rows, synchronous_standby_names is empty), and
// when it names synchronous standbys of which none streams. It warns rather than
// refuses: it sees only the standbys streaming at that moment (not one
// restoring from a WAL archive, nor one disconnected), replicas kept for
// reads or disaster recovery may never be promoted automatically, and a
// storage-level replication (as some managed services use) shows none.
// After a failover to an asynchronous standby, raise transitions above
// every token handed out (docs/backends.md, "When tokens go back").
//
// A resource that checks tokens (package fence) refuses a lower token and
// the same token from another holder (fence.ErrTokenReused), so a repeated
// token's second holder cannot write where the first one wrote, provided
// the guard's table did not fail over with the records. If it did, in the
// same database, the first holder's writes made before the failover are
// lost with its term (a standby has a prefix of the primary's WAL, and a
// holder writes only after its acquire committed), and whichever holder of
// the repeated token writes there first after the failover binds it.
//
// An epoch that rises at every failover (the timeline ID, which every
// promotion raises) could keep tokens rising without synchronous
// replication, but not within the backend contract: the token is the
// stored transitions, which package election raises by one per term and
// every store keeps as written, so the backend would have to present a
// token that no write stored, and the tokens of one election would no
// longer count its terms. A synchronously replicated commit keeps the
// token as it is.
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
