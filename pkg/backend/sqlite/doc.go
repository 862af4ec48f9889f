// Package sqlite is a backend.Backend on one SQLite database file, shared by
// processes on one host: local development, tests, single-node and kind
// clusters. It uses modernc.org/sqlite, so it builds without cgo.
//
// # Storage
//
// Each election is one row of the table leader_records, keyed by the
// election name:
//
//	leader_records(name TEXT PRIMARY KEY, version INTEGER NOT NULL,
//	               holder TEXT NOT NULL, lease_duration_seconds INTEGER NOT NULL,
//	               acquire_time_us INTEGER, renew_time_us INTEGER,
//	               transitions INTEGER NOT NULL)
//
// Times are Unix microseconds (backend.TimePrecision); a zero time.Time is
// stored as NULL and read back as zero, every other time is read back in UTC.
// Open creates the tables if they are missing (CREATE TABLE IF NOT EXISTS
// inside a write transaction), so any number of processes may open the same
// new file at once. That transaction also proves the file writable: Open
// fails, naming the file, when its directory is missing, when the file or its
// directory is read-only, when the file is not an SQLite database, or when
// another process holds the write lock past the busy timeout. On a healthy
// file it writes nothing.
//
// # Versions
//
// A record's version is a number drawn from a counter held in a second
// table, leader_versions, which has a single row that every write increments
// in the same transaction as the record itself. The counter is shared by all
// elections in the file and only grows, so a version is never issued twice
// within one file: not for another election, and not for a record that is
// deleted (by an operator) and created again. Should the counter row itself
// be removed, it restarts above the highest version still stored. Versions
// are decimal strings and opaque to callers.
//
// # Guarantees
//
// Create and Update run inside BEGIN IMMEDIATE transactions, which take
// SQLite's single write lock before reading anything. Update reads the stored
// version, compares it with the version passed in, and writes only if they
// are equal, all under that lock: of any number of writers racing from one
// version, in this process or in others, exactly one succeeds and the rest
// get backend.ErrConflict. Nothing is cached between calls.
//
// The database runs in WAL journal mode with synchronous=FULL: readers never
// block the writer, and a committed write survives a crash of the process or
// of the host, so a fencing token never goes backwards. A writer that finds
// the write lock taken waits up to Options.BusyTimeout for it; past that the
// call fails with an error naming the file and the timeout.
//
// Each Watch polls PRAGMA data_version, a read, on a connection of its own.
// The value changes whenever another connection commits to the file, so a
// watcher learns of a release or takeover within one Options.PollInterval.
//
// # Connections
//
// A Backend has two connection pools on the file. Get, Create and Update
// share a pool of two connections, so a read is not held up by a write
// waiting for the lock. Each active Watch holds one connection of a second,
// unbounded pool, so watches and writes never wait for each other's
// connections. Close ends the watches and closes both pools.
//
// # Limits
//
// SQLite's locking is only as good as the file locks beneath it, and WAL mode
// needs shared memory between the processes. The file must therefore live on
// a local disk of one host, reached by every process through the same
// kernel: not on NFS, SMB/CIFS, 9P, FUSE, or another network or cluster
// filesystem. Open refuses a path on a filesystem known to be one (detected
// with statfs on Linux; other systems are not checked) unless
// Options.AllowNetworkFS is set, in which case Warnings reports it. Sharing
// the file between containers on one host through a hostPath or emptyDir
// volume is fine.
//
// The process must be able to write both the file and its directory, where
// SQLite creates the -wal and -shm files. SQLite uses POSIX advisory locks,
// which the kernel drops when any descriptor of the file closes in the same
// process: do not open and close the database file by other means (a backup,
// a checksum) in a process that holds it open.
package sqlite
