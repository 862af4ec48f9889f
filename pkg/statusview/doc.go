// Package statusview is what `sidecar status` (and the kubectl plugin,
// `kubectl leader status`) shows of elections, and how: a row per
// election computed from its stored record and the observer's clock
// (Row), printed as a table, a wide table or JSON (Table, List); and the
// View that lists a Source's elections once or, with --watch, prints an
// election's row again whenever what an operator acts on changes.
//
// The package reads no store: a Source (the command's, over Leases or a
// SQLite file) hands it Elections.
//
// The ages and the stale verdict compare the record's times, written by
// the holder's clock, with this machine's clock: a display hint only. The
// election never does that (a standby judges expiry by how long it has
// seen the record unchanged, on its own monotonic clock), so clock skew
// between this machine and the holder's shows here as a renewal that is
// too old (stale) or in the future (a negative age), and nowhere else.
package statusview
