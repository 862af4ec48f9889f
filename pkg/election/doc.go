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
// it. A candidate never writes a token lower than one it has seen: a
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
// under a longer one.
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
// would another holder's; a holder of a deleted record stops claiming
// within its renew deadline, before that. One that saw a record and then
// finds it missing first waits, from the answer that first showed it
// missing, the last record's lease duration (at least its own), and then
// does the same. Two exceptions, both where no other holder can claim:
// the holder itself, while it still claims, recreates the record at once
// with a new token and keeps leading, so a live leader leaves no
// leaderless gap; and on a store that proves no record of the election
// was ever created (backend.FirstCreator: SQLite, whose records cannot be
// deleted), a candidate creates the first record with CreateFirst, which
// fails if any record ever existed, and leads at once (unless the create
// is answered after the claim it gives has lapsed: it is then claimed a
// lease duration later, as a recreated one). The cost: on a new Lease the
// first leader is elected one lease duration after the first candidate
// starts, once per Lease; without a live leader, a deleted record leaves
// the election leaderless for two lease durations.
//
// Records a candidate did not know it wrote. A record that names this
// candidate but whose version it does not know it wrote (a request that
// landed after the candidate gave up on it) is waited out like another
// holder's unless the candidate still claims: the record may have landed
// after the one it replaced was deleted under a holder that still claims.
// For the same reason a candidate releases only a version it wrote and
// claimed: a release is taken over at once.
//
// Change signals reach the leader too. A leader keeps its renewal
// schedule, but when the backend signals a change that is not its own
// last write (the snapshot shows another version, or the backend keeps
// no snapshot), it reads the record at once: a record deleted, replaced
// or written by someone else under it ends its claim (or, if deleted, is
// recreated) within the signal's latency, not at its next renewal. On
// SQLite, which keeps no snapshot, that is one local read after each
// renewal. A leader whose write loses a race (a conflict, or a record
// created by someone else first) reads again at once.
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
// A lost store. A backend that can lose its store (backend.LossNotifier,
// a SQLite file deleted or replaced) makes the candidate stop claiming the
// moment the loss is noticed; Run then returns an error wrapping
// backend.ErrStoreLost, so that the process can restart onto the new store.
//
// These rules are the function decide (rules.go), a pure function of what
// the candidate knows and the time; the loop only carries them out.
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
// How nearly: a standby whose clock runs fast by a factor f and a leader
// whose clock runs slow by s overlap once f/s exceeds
// LeaseDuration/RenewDeadline (1.5 with the defaults), and the request
// latency between the leader's renewal and the standby's first sight of it
// only adds margin. Measured with the simulator (go run ./hack/sim -drift
// D), each candidate's clock rate drawn in [1-D, 1+D] and the renew
// interval from its whole valid range: no overlap in 4000 schedules at
// D = 0.2 (rates apart by up to 1.5), then 1 in 4000 at D = 0.25 (rates
// 0.81 and 1.24, 1.52 apart), 3 at D = 0.3 and 13 at D = 0.4. Real clocks
// drift by parts per million.
//
// Those assumptions can fail (a process paused between reading Status and
// doing its write, a clock running fast), which is why the fencing token is
// the real guarantee: a resource that refuses tokens lower than the highest
// it has accepted rejects the stale write. ValidUntil and self-demotion only
// narrow the window in which a stale write is attempted.
//
// # Renewing less often than retrying
//
// The leader renews RenewInterval after the start of its last successful
// renewal (default LeaseDuration/3: every 5s, 12 writes a minute at the
// default timings, where client-go renews every RetryPeriod, 30 a minute).
// After a failed request it tries again every RetryPeriod instead, plus up
// to 20% jitter, until a renewal succeeds or its claim ends.
//
// The interval cannot lengthen a claim, so the argument above holds for
// every interval. Let s be the start of the holder's last successful
// renewal, which wrote the record a standby saw last, and seen the moment
// the answer that showed the standby that record arrived (after the write
// landed, so after s):
//
//	the holder claims while  now < s + RenewDeadline        (self-demotion, at every answer)
//	a standby may write at   seen + max(record lease, own)  (decide's expiry)
//	                         >= s + LeaseDuration
//
// and RenewDeadline < LeaseDuration. Renewing less often only means fewer
// extensions: a leader that stops renewing (crashed, paused, cut off)
// stops claiming at s + RenewDeadline whatever the interval, and if its
// last write was seen later than s, the standby only waits longer.
//
// Room for retries. A longer interval leaves fewer tries before the claim
// ends, so Config requires RenewInterval > 0 and RenewInterval +
// JitterFactor*RetryPeriod < RenewDeadline: after a renewal that fails at
// once, a retry starts, even after the longest jittered wait, while the
// leader still claims. At the defaults (15s, 10s, 2s, renew interval 5s)
// a renewal starts at s+5s; if the store fails fast, retries start at
// s+7s to s+7.4s and s+9s to s+9.8s; the leader stops claiming at s+10s:
// three tries (the renewal and two retries) fit before demotion. A request
// that hangs cannot use up the claim: a leader's attempt is cut off when
// what is left of its claim is down to half a retry period (or to half of
// what was left when it started, if that is less), and an attempt cut
// off so, or one that took longer than the jittered retry period, is
// retried at once (the retry period counts from the start of the failed
// attempt). At the defaults a
// renewal at s+5s that hangs is cut off at s+9s, a retry that hangs too at
// s+9.5s, and a third try starts at s+9.5s with 0.5s left; a store that
// answers within 4s renews every time. A standby's attempt may
// take the whole renew deadline. (The Lease backend's client closes its
// connections when a request runs out of time, so a retry after a hung
// request does not queue on the same, possibly dead, connection.)
//
// client-go candidates on the same Lease judge expiry the same way, from
// what they observe: each remembers when it last saw the Lease's record
// change (observedTime, taken after its read returned) and takes over only
// once observedTime + the record's leaseDurationSeconds has passed. Every
// renewal writes a new renewTime, which such a candidate sees as a change,
// so while the sidecar renews every RenewInterval (5s < a 15s lease) no
// client-go candidate sees the record unchanged for a lease duration; once
// renewals stop, its observedTime is after s, so it takes over no earlier
// than s + LeaseDuration, after the sidecar's claim ended at s +
// RenewDeadline.
//
// # Planned hand-off
//
// Handoff moves leadership from the leader L to a chosen candidate X (or
// to whichever candidate answers first) with the next token, without a
// moment in which two claim and without a registry of candidates: L asks
// through the record itself, so idle standbys still send nothing. The
// record carries a marker (backend.Handoff) and takes three writes, each a
// compare-and-swap on the version just read:
//
//  1. Offer. L renews the record as usual (holder L, token t, its claim
//     renewed from the start of this write) with the marker {offer, from
//     L, to X or "" for anyone, token t}, then looks for an answer every
//     10ms (from the backend's snapshot when it keeps one, reading the
//     record at most every 100ms; otherwise reading it), for
//     HandoffTimeout: a second, or half the renew deadline if shorter.
//  2. Accept. A candidate that sees an offer it may take writes the same
//     record with the marker {accept, from L, to its own identity, token
//     t}: holder, times and token unchanged. It may take the offer when
//     the offer targets it (its identity, its Pod name, which is its
//     identity's prefix, or anyone), the record is live (seen unchanged
//     for less than a lease), t is the highest token it has seen, and
//     mayAcceptHandoff allows it (not stopping, not held off after a
//     release). It remembers, in memory only, that it accepted L's offer
//     at t. Of several candidates racing, compare-and-swap lets exactly
//     one accept.
//  3. Transfer. L sees the accept, stops claiming first (Status says "not
//     leader" before the write is sent), and writes holder X, token t' =
//     one above the highest token L has seen (t+1 unless a reset let L
//     see a higher one), acquire and renew time now, its lease duration,
//     marker {transfer, from L, to X, token t'}, over the accept's
//     version. Whatever that write's outcome, L does not claim again: it
//     is a standby.
//  4. X, finding a record that names it with a transfer marker from L at
//     a token t' above t while it remembers an accept of L's offer at t
//     (made less than a lease duration ago), renews it like any renewal,
//     clearing the marker, and leads with token t' from the start of that
//     renewal. If X may no longer lead by then (it sits out, or is held
//     off after a release), it writes the release shape over the transfer
//     instead, token t' kept, so a standby takes over at once. A
//     transferred record without such an accept (edited by hand, or a
//     marker left behind) is waited out like any record naming this
//     candidate that it did not write.
//
// If no accept comes in time, L renews the record without the marker
// (an accept that landed just before is then taken after all) and Handoff
// fails with ErrNoTaker: nothing changed, L leads with token t. Candidates
// are known only by their answers: a target that is not running, is
// unknown, or may not lead now does not answer, and the error says so
// after the timeout. A read that shows the record changed under the offer
// (another holder or token, or none) ends the hand-off at once, handing
// nothing off; what L reads meanwhile counts as seen, as any answer.
//
// Why it is safe. L claims until it decides to transfer and stops before
// the transfer is sent; X claims only after its own compare-and-swap on
// the transfer's version, so no write came between, and every write that
// gives a claim is a write to this record. Its claim counts from the start
// of that renewal, before the write lands, so standbys, who count a lease
// from when they saw it, cannot take over before the claim ends. Every
// record of the chain names a live holder and is a new version (the offer
// and the transfer also carry new times, which is what client-go
// candidates look at), so standbys and client-go candidates on the same
// Lease keep waiting and never see a record they may take. If X dies after
// accepting, the transfer names X and is never renewed: standbys take
// over a lease after they saw it, exactly as after a leader's crash. If L
// dies after offering, or its claim lapses before it transfers, the record
// stops changing and is taken over a lease later as today; X's accept
// expires unused. Every record the election writes sets or clears the
// marker; one that client-go's writes carried along (they keep the Lease's
// annotations) is inert: its token no longer matches the record's, or no
// candidate remembers accepting it.
//
// # Liveness and cost
//
// Losing leadership never ends the loop: the candidate steps down and
// contends again. The leader renews every RenewInterval with one
// conditional Update on the version it wrote last (a read only when that
// fails), counted from the start of the last successful renewal, so a
// renewal that took longer than RenewInterval is followed at once by
// another; after a failed request it waits a jittered RetryPeriod before
// it tries again. A standby wakes when the backend signals a change and at
// the instant the rules may next allow it to write. A change signal is
// only an earlier read: the standby reads (or takes the snapshot) and
// applies every rule above, so a signal can never shorten a wait. If the
// backend is a backend.Snapshotter, the standby learns each change from
// the snapshot without a request and otherwise waits for that instant, so
// while the leader is healthy it sends nothing. Whenever a read shows a
// change that no snapshot reported (no snapshots, or a watch that fell
// silent), the standby polls every RetryPeriod (with up to 20% jitter)
// until snapshots keep up again. On shutdown with ReleaseOnCancel, and on
// Release, the leader writes an empty holder in the release shape (token
// kept) so a watching standby can take over at once.
//
// # Sitting out
//
// SitOut takes a candidate out of the election (the sidecar does it while
// its application fails its health check): it stops claiming at once,
// then releases the record if it names it, exactly as Release does, and
// decide never lets it write until Rejoin, which makes it attempt at
// once. Both only keep a candidate from writing: every rule above still
// decides when a candidate that rejoined may take the record.
//
// Healthy reports a wedged loop: an attempt or a snapshot in hand for
// longer than RenewDeadline plus two retry periods. Waiting is not wedged:
// a standby that learns every change from snapshots may go a whole lease
// without an attempt and stays healthy.
package election
