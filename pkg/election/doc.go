// Package election is the candidate loop of leader-sidecar: it acquires,
// renews, steps down from and releases one record in a backend.Backend. It
// is the only place that decides who leads; backends only store.
//
// This doc states the rules and why they are safe. The measurements, the
// schedules at the default timings and the planned hand-off step by step
// are in docs/election.md.
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
// it. A candidate never writes a token lower than one it has seen (read,
// written, or shown by a snapshot, even one it then left for a read): a
// record whose token went back (recreated by a client-go candidate at 0,
// edited by hand) is reported (Observer.TokenAnomaly, once per holder
// and token, not at every renewal of that holder) and the next term
// continues above the highest token seen. A token edited by hand on the
// leader's own record starts a new term above it. No term starts beyond
// backend.MaxTransitions: the candidate reports TokenExhausted and waits
// for an operator to reset the record; tokens never wrap. A candidate that
// starts after every earlier one has gone knows only the stored token, so
// tokens can go back when the record is recreated or its store replaced
// while no candidate that saw the old tokens is running.
//
// Expiry. A candidate takes over a record held by someone else only after it
// has seen that record unchanged (same backend.Version) for the record's
// lease duration, but never less than its own LeaseDuration, measured on
// its own monotonic clock from the moment the answer that first showed that
// version arrived (not when it was asked for: a slow read must not shorten
// the wait). RenewTime written by another machine is never compared with
// the local clock, so clock skew between nodes does not shorten a lease,
// and a lease duration shortened by hand does not shorten a claim made
// under a longer one. A record's lease duration is trusted up to a bound,
// MaxRecordLeaseDuration (ten times LeaseDuration by default, never less
// than it): a longer one, from a client with a bug or a hand edit, is
// waited out as the bound and reported (LeaseBoundObserver), so one write
// of 2147483647 seconds does not keep every candidate out for 68 years.
// Every candidate of an election must trust the longest lease duration
// any of them writes.
//
// Releases. Only a record in the shape a release writes (here and in
// client-go: no holder, a lease of one second, acquire time equal to renew
// time) is taken at once. Any other record without a holder (emptied by
// hand) is waited out like an expiry, except by its holder while it still
// claims, which takes it back at once with a new token.
//
// A missing record. An absence has no version, so a candidate that finds
// no record cannot tell whether a record was created and deleted while it
// was not looking (before it started, while paused, or between two
// changes its watch coalesced), and whether that record's holder still
// claims. So a candidate that finds no record creates it at once (the
// next token above the highest it has seen) but claims it only after it
// has seen its own new record unchanged for its lease duration, as it
// would another holder's (the record it creates has no RenewTime until
// that first renewal starts the claim, so that a reader of the record can
// tell the claim is pending); a holder of a deleted record stops claiming
// within its renew deadline, before that. One that saw a record and then
// finds it missing first waits, from the answer that first showed it
// missing, the last record's lease duration (at least its own), and then
// does the same. Two exceptions, both where no other holder can claim:
// the holder itself, while it still claims, recreates the record at once
// with a new token and keeps leading; and on a store that proves no record
// of the election was ever created (backend.FirstCreator), a candidate
// creates the first record with CreateFirst, which fails if any record
// ever existed, and leads at once (unless the create is answered after the
// claim it gives has lapsed: it is then claimed a lease duration later, as
// a recreated one). A candidate stopped with HandoffOnStop before its claim
// on a record it created begins does not leave that record to be waited
// out for a further lease from whenever the next candidate saw it: it
// waits until its claim could begin, and then releases the record,
// unclaimed, if it still holds the version it created. From that instant
// it could have claimed the record itself, so a standby that takes the
// release at once claims nothing an earlier holder still may.
//
// Records a candidate did not know it wrote. A record that names this
// candidate but whose version it does not know it wrote (a request that
// landed after the candidate gave up on it) is waited out like another
// holder's unless the candidate still claims: the record may have landed
// after the one it replaced was deleted under a holder that still claims.
// For the same reason a candidate releases only a version it wrote and
// claimed: a release is taken over at once. One exception: a renewal
// whose answer never arrived (cancelled by a shutdown, timed out, lost in
// transport) may have landed, so the candidate remembers the record it
// sent, and if the next record it sees is equal to it (holder, token,
// lease, acquire and renew time at the microseconds every store keeps,
// hand-off marker), it takes that version as its own write, to renew or
// release. Only this candidate writes a record naming itself with that
// renew time (nobody else has that timestamp), so a read-back equal to it
// is its own write, which it had claimed: a renewal is a compare-and-swap
// on a version the candidate claimed or wrote, so it landed on that
// version with nothing between, never on a record recreated after a
// deletion. Creates and hand-off accepts are never taken so: only
// renewals. Any other record seen first means the renewal did not land,
// or was written over, and it is forgotten.
//
// Change signals reach the leader too. A leader keeps its renewal
// schedule, but when the backend signals a change that is not its own
// last write (the snapshot shows another version, or the backend keeps
// no snapshot), it reads the record at once: a record deleted, replaced
// or written by someone else under it ends its claim (or, if deleted, is
// recreated) within the signal's latency, not at its next renewal. A
// leader whose write loses a race (a conflict, or a record created by
// someone else first) reads again at once.
//
// Self-demotion. The leader claims leadership only while
//
//	now < start of its last successful acquire or renew + RenewDeadline
//
// and this is computed when Status is called, not by a background tick. A
// leader whose loop is stuck, or whose process was paused, answers "not
// leader" on its first Status after waking, before it talks to the store
// again. Both the monotonic and the wall clock must agree that the
// deadline has not passed: the monotonic clock stops while a machine is
// suspended, the wall clock does not.
//
// A lost store. A backend that can lose its store (backend.LossNotifier,
// a SQLite file deleted or replaced) makes the candidate stop claiming the
// moment the loss is noticed; Run then returns an error wrapping
// backend.ErrStoreLost, so that the process can restart onto the new store.
//
// Sitting out. SitOut takes a candidate out of the election: it stops
// claiming at once, then releases the record if it names it, exactly as
// Release does, and decide never lets it write until Rejoin, which makes
// it attempt at once. Every rule above still decides when a candidate that
// rejoined may take the record.
//
// These rules are the function decide (rules.go), a pure function of what
// the candidate knows and the time; the loop only carries them out.
//
// # Why this is safe
//
// The holder's claim ends at renewStart+RenewDeadline. Another candidate
// can take over no earlier than LeaseDuration after it saw the holder's last
// write, which landed after renewStart. Because RenewDeadline <
// LeaseDuration, the old claim ends before a new one can begin, provided
// that clocks on the two machines advance at nearly the same rate (not that
// they agree) and that the store's compare-and-swap is linearizable. A
// standby whose clock runs fast by a factor f and a leader whose clock runs
// slow by s overlap only once f/s exceeds LeaseDuration/RenewDeadline (1.5
// with the defaults); request latency only adds margin.
//
// The renew interval cannot lengthen a claim. Let s be the start of the
// holder's last successful renewal, which wrote the record a standby saw
// last, and seen the moment the answer that showed the standby that record
// arrived (after the write landed, so after s):
//
//	the holder claims while  now < s + RenewDeadline                    (self-demotion)
//	a standby may write at   seen + max(min(record lease, bound), own)  (expiry)
//	                         >= s + LeaseDuration
//
// A leader that stops renewing stops claiming at s + RenewDeadline whatever
// the interval. Config requires RenewInterval > 0 and RenewInterval +
// JitterFactor*RetryPeriod < RenewDeadline, so that after a renewal that
// fails at once a retry starts while the leader still claims. A leader's
// attempt is cut off when what is left of its claim is down to half a
// retry period (or to half of what was left when it started, if that is
// less), but never sooner than one and a half times what its last
// successful write took (nor after the claim ends), and an attempt cut off
// so, or one that took longer than the jittered retry period, is retried
// at once: a request that hangs on a store that has been answering fast
// cannot use up the claim, and a store that answers slowly but within the
// claim is not cut off before its answer. A standby's attempt may take the
// whole renew deadline.
//
// client-go candidates on the same Lease judge expiry the same way: each
// takes over only once the record's leaseDurationSeconds has passed since
// it last saw the record change (after its read returned). Every renewal
// writes a new renewTime, so while the sidecar renews no such candidate
// sees the record unchanged for a lease; once renewals stop, it takes over
// no earlier than s + LeaseDuration, after the sidecar's claim ended.
//
// Those assumptions can fail (a process paused between reading Status and
// doing its write, a clock running fast), which is why the fencing token is
// the real guarantee: a resource that refuses tokens lower than the highest
// it has accepted rejects the stale write. ValidUntil and self-demotion only
// narrow the window in which a stale write is attempted.
//
// # Planned hand-off
//
// Handoff moves leadership from the leader L to a chosen candidate X (or
// to whichever candidate answers first) with the next token, through a
// marker in the record (backend.Handoff) and three compare-and-swap
// writes: L renews the record with an offer; X writes an accept (holder,
// times and token unchanged) when the offer targets it, the record is
// live, the offer's token is the highest it has seen and mayAcceptHandoff
// allows it, and remembers the accept in memory only; L stops claiming,
// then writes holder X with one above the highest token it has seen and a
// transfer marker. X renews a transfer to it only while it remembers an
// accept of L's offer, and leads from the start of that renewal; if it may
// no longer lead, it writes the release shape instead. Without an accept
// within HandoffTimeout, L removes the offer and leads on (ErrNoTaker).
//
// Why it is safe. L claims until it decides to transfer and stops before
// the transfer is sent; X claims only after its own compare-and-swap on
// the transfer's version, so no write came between, and every write that
// gives a claim is a write to this record. Its claim counts from the start
// of that renewal, before the write lands, so standbys, who count a lease
// from when they saw it, cannot take over before the claim ends. Every
// record of the chain names a live holder and is a new version with new
// times, so standbys and client-go candidates keep waiting. If X dies
// after accepting, the transfer is never renewed: standbys take over a
// lease after they saw it, as after a leader's crash. If L dies after
// offering, or its claim lapses before it transfers, the record stops
// changing and is taken over a lease later; X's accept expires unused. A
// marker carried along by client-go's writes is inert: its token no longer
// matches the record's, or no candidate remembers accepting it.
//
// # Succession in a rollout
//
// Candidates are not listed anywhere, so the revision a successor should
// have travels in the offer: a leader's offer carries its Config.Revision
// (its Pod's pod-template-hash or controller-revision-hash, from the
// Downward API), and a candidate compares it with its own. An offer to
// anyone from a leader of the candidate's own revision is accepted only
// once it has stood SameRevisionWait (a quarter of HandoffTimeout); a
// candidate of another revision, or one that knows none, accepts at once.
// So with HandoffOnStop a stopping leader hands over to a Pod of the new
// revision when one is there, else to one of its own, else (no accept
// within HandoffTimeout) it releases. A candidate that is stopping never
// accepts (mayAcceptHandoff), nor takes a release. The wait only orders
// accepts; every safety argument above is unchanged.
//
// A StatefulSet replaces its Pods from the highest ordinal down, and a
// leader there stops before any Pod of the new revision runs: whoever it
// hands to is replaced later, and leadership moves twice. Its Pod keeps
// its name, though, so with AwaitReplacement a stopping leader offers
// nothing: it releases with a reserve marker (backend.HandoffReserve)
// naming its Pod (IdentityPrefix) and revision. A candidate of that Pod
// name (the replacement) or of another revision takes the release at
// once; any other waits until it has seen it for the marker's wait (at
// most MaxRecordLeaseDuration), then takes it as a release
// (reservedForAnother). The marker only delays acquires of a release,
// which any candidate may make at once, so again no safety argument
// changes; a candidate that predates the marker reads it as none and
// takes the release at once. The cost is availability: the election has
// no leader while the replacement starts, and up to the wait when none
// comes (a scale-down).
//
// # Liveness
//
// Losing leadership never ends the loop: the candidate steps down and
// contends again. The leader renews RenewInterval (default LeaseDuration/3)
// after the start of its last successful renewal, at once if that renewal
// took longer; after a failed request it tries again a jittered RetryPeriod
// after the failed attempt started. A standby wakes when the backend
// signals a change and at the instant the rules may next allow it to write;
// whenever a read shows a change that no snapshot reported (no
// backend.Snapshotter, or a watch that fell silent), it polls every
// RetryPeriod until snapshots keep up again. A change signal is only an
// earlier read: the rules still apply, so a signal can never shorten a
// wait. A snapshot that shows a record the standby may acquire at once (a
// release) is the read of the attempt that follows, and so is the snapshot
// of a record the standby waited on to expire while snapshots kept up (a
// crashed leader's): the acquire is written on the snapshot's version
// without a Get first, so a snapshot the store has moved past costs a
// conflict, and the next attempt reads. The record's age still counts
// from this candidate's first sight of that version, as after a Get that
// returned it again. On shutdown
// with ReleaseOnCancel, and on Release, the leader writes the release shape
// (token kept) so a watching standby can take over at once.
//
// Healthy reports a wedged loop: an attempt or a snapshot in hand for
// longer than RenewDeadline plus two retry periods. Waiting is not wedged:
// a standby that learns every change from snapshots may go a whole lease
// without an attempt and stays healthy.
//
// # Reporting
//
// An Observer hears every term of this candidate begin and end, renew
// failures and token anomalies, in order and never under the elector's
// lock. A TermObserver hears also why each term ended (TermEndReason) and
// the gap before each term as the new leader saw it (TermStart.Gap: from
// the first sight of the record version it took over to its own write,
// on its monotonic clock). Status reports when the current or last term
// began and when the last renewal began, as pkg/metrics exports them.
package election
