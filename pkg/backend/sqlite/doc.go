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
//	               transitions INTEGER NOT NULL, handoff TEXT NOT NULL DEFAULT '',
//	               group_mark TEXT NOT NULL DEFAULT '')
//
// handoff is the record's hand-off marker (backend.EncodeHandoff: compact
// JSON, the empty string for none). A file made before it existed gets the
// column from the first Open of this release (ALTER TABLE ... ADD COLUMN,
// in the same transaction as the table checks); its rows then carry no
// marker, and a process of an older release keeps working on the file,
// leaving the column as it finds it, as client-go leaves the Lease's
// annotation. group_mark is the record's shard-group mark
// (backend.EncodeGroupMark), added to older files the same way.
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
// The file should be the election's own. Open refuses, before any
// connection that could change it opens, a file that already holds tables
// other than leader_records, leader_versions and leader_deletes_refused (an
// application's own database, named by mistake): the error names the file,
// a few of the tables found, and what Open would change (its tables and
// triggers added, the file switched to WAL mode, which outlives the
// backend). Options.SharedFile (the sidecar's --sqlite-shared-file) accepts
// such a file, shared on purpose.
//
// # Versions
//
// A record's version is a number drawn from a counter held in a second
// table, leader_versions, which has a single row that every write increments
// in the same transaction as the record itself. The counter is shared by all
// elections in the file and only grows, so a version is never issued twice
// within one file, not for another election. Should the counter row itself
// be removed, it restarts above the highest version still stored. Versions
// are decimal strings and opaque to callers.
//
// # Records are never deleted
//
// Triggers in the schema refuse a DELETE on leader_records, and an UPDATE
// that renames a row, with a message that names `sidecar reset`: a
// candidate that finds no record may lead at once, beside a holder of the
// deleted one that still runs. Open adds them to a file made without them.
// `sidecar reset` is the way to reset an election: it writes the record
// back released with its token kept, once no holder renews it.
//
// So Get can prove that an election never had a record: when its row is
// absent and rows were never deletable in the file (the table
// leader_deletes_refused notes the version counter's value when the
// triggers were installed: 0 for a file made with them), Get's error wraps
// backend.ErrNeverCreated as well as backend.ErrNotFound. In a file that
// had records before the triggers were added (or that had them dropped), an
// absent election reads as ErrNotFound alone: a row may have been deleted.
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
// of the host, so a fencing token never goes backwards. The one exception
// is a release (a write that names no holder): it commits with
// synchronous=NORMAL, on a connection of its own opened at that level,
// without waiting for the disk, which takes one fsync off a graceful
// hand-off. It still survives a crash of the process (its pages are in the
// WAL file before Commit returns), and the next write that names a holder
// makes it durable along with itself (the WAL is synced in order). Only a
// crash of the host can forget it, and with it every process that shares
// the file (a network filesystem is refused); the record then names the
// last holder as of its last durable write, which starts no term:
// candidates wait it out as after a crash, and the next term's token is
// still one above it. The writes of a process's Backends on one file take
// turns in the process, in the order they come (a shard group's hundreds
// of records renew through one queue, not through SQLite's busy retries);
// a writer waits up to Options.BusyTimeout for its turn, and then up to
// Options.BusyTimeout for the write lock, which only another process can
// hold then; past either the call fails with an error naming the file and
// the timeout.
//
// The Backends of a process open on one file, whatever their elections,
// watch it together: one connection reads PRAGMA data_version, a read,
// while any of them watches. The value changes whenever another connection
// commits to the file; the watch then reads every election's row in one
// query and signals each Watch whose election's row changed, so the writes
// of the other elections of a file (a shard group's other records) wake no
// elector, and a group of any size costs one reader. The watch reads
// data_version as soon as the watch on the file's directory (fsnotify;
// inotify on Linux, see Store identity) reports a write to the file or its
// -wal, and then every millisecond until the commit shows (it is published
// in the -shm just after the write that is reported), so a watcher learns
// of a release or takeover within milliseconds. It also reads it every
// Options.PollInterval (the shortest of the Backends watching), the
// fallback when the directory cannot be watched or an event is dropped: a
// change is never seen later than that.
//
// # Connections
//
// A Backend has two connection pools on the file. Get, Create and Update
// share a pool of two connections, so a read is not held up by a write
// waiting for the lock; releases have a connection of their own
// (durability.go). The watch of the file holds one connection of a third
// pool, shared by the process's Backends on the file, so watches and
// writes never wait for each other's connections. Close ends the
// Backend's watches and closes its pools, and the shared watch with the
// last Backend on the file.
//
// # Store identity
//
// SQLite opens its file by path once and then works on the open file. If
// the file is deleted, or another file is renamed over the path, running
// processes keep working on the old file while a process that starts now
// creates or opens the new one: two stores, each with a leader, with equal
// tokens. The backend therefore remembers the file it opened (its device and
// inode numbers on unix, compared with os.SameFile; the system's own file
// identity elsewhere) and notices when the path names another file or none.
//
// The file remembered is the one the connections hold open, not merely the
// one the path names at some instant. The watch on the directory is set up
// before the first connection opens. Every connection, of every pool and
// whenever database/sql opens it, is opened one at a time in the process:
// the path is stat'ed, the connection opened and read through (which opens
// the -wal and -shm), and the path stat'ed again; on Linux the descriptors
// the open added (/proc/self/fd) must not include another file at the
// path. The first connection's file is the identity, taken only when the
// path named it both before and after (else Open opens again); every later
// connection must be on it, or the store is lost. When the file is lost
// while Open runs, Open starts again on the file now at the path (a few
// times, then it fails with backend.ErrStoreLost). So a Backend never reads
// one file while vouching for another, and every Backend opened on a
// deleted or replaced file reports the loss:
//
//   - within milliseconds, by a watch (fsnotify; inotify on Linux) on the
//     file's directory, and on the directory of the file a symbolic link
//     resolves to. Any event naming the file or the directory makes it stat
//     the path and compare. The goroutine starts at Open and ends at Close.
//     The process's Backends share one watcher (one inotify instance, of
//     the 128 Linux allows a user by default), whatever their number.
//   - at the latest on the next Get, Create or Update, which stat the path
//     on every call: Get after reading, writes inside the write transaction
//     before reading or writing anything. If the watch cannot be set up
//     (inotify limits, say), Open still succeeds and Warnings says so; this
//     check remains.
//
// Once it notices, Lost (backend.LossNotifier) is closed, every active Watch
// gets a signal, and every later Get, Create and Update fails with an error
// wrapping backend.ErrStoreLost that names the file and says whether it is
// missing or another file. The loss is permanent for the Backend: a caller
// must stop claiming leadership at once, close the Backend and start again
// (the sidecar exits non-zero, to be restarted) on the file now at the path.
// Close does not close Lost. A failure to stat the path for another reason
// (an unreadable directory) fails the call without declaring a loss.
//
// Deleting or replacing the file resets the fencing tokens: the new file
// starts from no record, and its first leader gets token 1 again. Whatever
// stores tokens on the resource side (a fence table) must be reset with the
// file, or it will refuse the new leader's smaller tokens.
//
// Only the main database file's identity decides a loss, not the -wal and
// -shm files beside it. SQLite itself deletes those when the last
// connection to the file closes and creates new ones on the next open, so
// their identity changes in normal use (and their events are ignored).
// Deleting them by hand while processes have the database open is a way to
// corrupt an SQLite database that SQLite documents and this backend does
// not detect. The window this check cannot close: a replacement between the
// stat and the commit of a write, microseconds, after which the next call
// or the watch reports the loss.
//
// # The old file's -wal and -shm
//
// SQLite never checkpoints or deletes the WAL of a file that was moved
// away or deleted under it, so after `mv other.db leader.db` (or `rm
// leader.db`) the old file's leader.db-wal and leader.db-shm stay beside
// the new leader.db. The next process to open the path would take them as
// the new file's own: read the old file's records through them and write
// the old pages into the new file (a replacement whose pages do not match
// could come out corrupt). On Linux, a backend that notices the loss
// therefore removes them before it logs the loss and returns it, while its
// connections still hold them open; Lost is closed just before. It removes
// each of <file>-wal and <file>-shm (beside the file a symbolic link
// resolves to) only if it is, by device and inode:
//
//   - a file this process has open now (listed in /proc/self/fd), so its
//     inode number cannot have been reused for another file, and
//   - the file seen at that path, just before a check that found the path
//     still naming the database (at Open, and on every Get, Create and
//     Update): a file of the old database.
//
// It removes neither while the old database still exists: when the path,
// looked at again under the directory lock below, names the old database
// again (moved back), or when the old file, seen through this process's
// open descriptor, still has a link in some directory (`mv leader.db
// elsewhere`, or `ln leader.db x && rm leader.db`). Its -wal then holds
// every commit since its last checkpoint, which SQLite never copies into a
// moved file; the log says it kept them, and why. Moved back (or linked
// back) at the path, the file has its records, and tokens carry on.
//
// Anything else there is kept and named in the log: a -wal or -shm made by
// a process that opened the new file is never removed. The backends of all
// processes on the directory take turns under an flock on it (waiting up
// to a second), so when several notice at once exactly one removes each
// file, and none removes a file made after another's removal. The log line
// (Options.Logger, slog.Default() when nil) says what the path names now and what was removed or
// kept; every later call returns the loss. Close waits for the removal.
//
// Not guaranteed:
//
//   - A process that opens the path after the replacement and before the
//     removal (within about a millisecond with the directory watch; until
//     the next call without it; for as long as every old process is
//     stopped or dead) may still take in the old -wal and -shm and keep
//     them open after they are removed; it and the processes that open the
//     path later then disagree about the file. The removal of the two files
//     is two steps, and a process opening the path between them fares no
//     better.
//   - A database moved aside keeps its -wal and -shm at the path: a new
//     file made at the path before the old one comes back would take them
//     in. Move the -wal and -shm along with the file, or put it back.
//   - Nothing is removed when no old process is running (they crashed or
//     were stopped first), when /proc is not mounted, when the path now
//     leads to another location through a changed symbolic link, or on
//     systems other than Linux, where a process cannot list the files it
//     has open this way.
//
// So, to replace the file safely, stop the sidecars first, or remove
// leader.db-wal and leader.db-shm before renaming another database over
// leader.db (`rm -f leader.db-wal leader.db-shm && mv other.db leader.db`);
// on systems other than Linux this is the only safe way. Run the two
// together: the sidecars keep using the old file until the rename, and
// removing the -wal drops the old file's last commits, which matters only
// because the old file is about to be replaced.
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
