// Package election is the candidate loop of leader-sidecar: it acquires,
// renews, steps down from and releases one record in a backend.Backend. It
// is the only place that decides who leads; backends only store.
//
// # Rules
//
// Identity. Every process start is a new candidate (NewIdentity appends a
// random suffix), so a restarted container never inherits its previous
// term, and the token moves forward across restarts.
//
// Token. The record's Transitions field is the fencing token. Each term has
// a token of at least 1; it goes up by exactly one whenever the holder
// changes, including from an empty holder after a release; a renewal keeps
// it. If the record disappears, the candidate recreates it with a token one
// above the highest it has ever seen. A candidate never claims a token lower
// than one it has seen.
//
// Expiry. A candidate takes over a record held by someone else only after it
// has seen that record unchanged (same backend.Version) for the record's
// lease duration, measured on its own monotonic clock from the moment it
// first saw that version. RenewTime written by another machine is never
// compared with the local clock, so clock skew between nodes does not
// shorten a lease. A record with no usable lease duration (zero or
// negative) is treated as having the candidate's own LeaseDuration. An empty
// holder (a released record) can be taken at once.
//
// Self-demotion. The leader claims leadership only while
//
//	now < start of its last successful acquire or renew + RenewDeadline
//
// and this is computed when Status is called, not by a background tick. A
// leader whose loop is stuck, or whose process was paused (GC, SIGSTOP, a
// stalled node), answers "not leader" on its first Status after waking,
// before it talks to the store again. Both the monotonic and the wall clock
// must agree that the deadline has not passed: the monotonic clock stops
// while a machine is suspended, the wall clock does not.
//
// # Why this is safe, and what it rests on
//
// The holder's claim ends at renewStart+RenewDeadline. Another candidate
// can take over no earlier than LeaseDuration after it saw the holder's last
// write, which landed after renewStart. Because RenewDeadline <
// LeaseDuration, the old claim ends before a new one can begin, provided
// that clocks on the two machines advance at nearly the same rate (not that
// they agree) and that the store's compare-and-swap is linearizable.
//
// Those assumptions can fail (a process paused between reading Status and
// doing its write, a clock running fast), which is why the fencing token is
// the real guarantee: a resource that refuses tokens lower than the highest
// it has accepted rejects the stale write. ValidUntil and self-demotion only
// narrow the window in which a stale write is attempted.
//
// # Liveness and cost
//
// Losing leadership never ends the loop: the candidate steps down and
// contends again. The leader renews every RetryPeriod with one conditional
// Update on the version it wrote last (a read only when that fails). A
// standby wakes when the backend signals a change and at the instant the
// record it watches would expire. If the backend is a
// backend.Snapshotter, the standby learns each change from the snapshot
// without a request and otherwise waits for that expiry, so while the
// leader is healthy it sends nothing. Whenever a read shows a change that
// no snapshot reported (no snapshots, or a watch that fell silent), the
// standby polls every RetryPeriod (with up to 20% jitter) until snapshots
// keep up again. On shutdown with ReleaseOnCancel, and on Release, the
// leader writes an empty holder (token kept) so a watching standby can take
// over at once.
package election
