// Package shardgroup runs one replica's part in a shard group: N shards,
// each an election of its own on its own record, spread over the
// replicas that are members of the group.
//
// Records, in the store every member shares:
//
//   - <group>-shard-<i> (ShardRecord), one per shard, written only by
//     package election's Elector: one per shard per replica, so every rule
//     of the single election holds per shard (at most one holder claims a
//     shard at any instant, its token rises by one per term, a holder
//     stops claiming before its claim can expire, a release hands the
//     shard over at once);
//   - <group>-member-<identity> (MemberRecord), one per replica, which
//     the replica renews like a lease. Another replica counts it a live
//     member while its record keeps changing within a lease duration by
//     that replica's own clock; a replica that leaves marks its record
//     leaving (no longer a member of its count's table), and writes it
//     back with no holder once it holds nothing, which counts as gone at
//     once.
//
// Every retry period, and at once when another replica releases a shard
// (mostly as it leaves), a replica lists the member records (backend.Lister;
// on Leases, from the watch of the namespace's Leases that its shards'
// electors share, without a request, while that watch is current),
// builds its view (the live members; each shard's holder as its elector
// last saw it, expired once the elector saw it unchanged for a lease, and
// draining while this replica drains it) and does what shard.Decide says:
// acquire = the shard's elector rejoins its election; a shard it neither
// acquires nor holds sits out (it keeps following the record); drain = the
// shard is marked draining here, and its application is asked to let it
// go (Status, and Drained for its acknowledgement); release = SitOut,
// which writes the release shape, once the application acknowledged or the
// drain timeout passed. No rule takes a shard from a live holder, so views
// that disagree can only delay a move; the elections keep one holder per
// shard whatever the views.
//
// A graceful stop (Run's context ending) leaves the membership first
// (its electors stop contending and its member record says leaving),
// then drains and releases every shard, writes its member record with no
// holder and stops the electors once none is held (or the stop drain
// timeout and a renew deadline have passed).
// While stopping, Config.StopDrainTimeout replaces the drain timeout: 0
// releases every shard in the pass that drains it, without waiting for
// an acknowledgement an application that has stopped cannot give.
//
// The drain mark is the holder's own: it is not written in the shard's
// record, so other replicas see a draining shard as held (which Decide
// treats alike).
//
// # Shard counts
//
// Every record a replica writes carries its count N (backend.GroupMark):
// its member record, and each shard record its electors write. Shard i of
// N and the shards of another count that cover the same keys are
// different elections, so the counts are kept apart by shard.StanceOf,
// from the live members and live shard holders of other counts this
// replica sees in the same list (live as everywhere here: a record that
// changed within a lease duration by this replica's clock; a shard record
// of any number is read, not only those of its own count). It yields to
// a larger count: drains and releases every shard, as if leaving, and
// once it claims and contends for nothing it writes Yielded into its
// member record. It waits while a smaller count holds a shard or has a
// member that has not yielded: it takes no shard. It also takes none while
// its member record was last written more than a renew deadline ago.
//
// What makes it hold:
//
//   - A replica writes its member record, then lists, before it takes a
//     shard; it takes Yielded back out of its record by a write, then a
//     list, before it contends again; and a member write a renew deadline
//     or more after the one before (after a pause, or a stalled store:
//     others may have seen the record expire) needs a list after it too.
//     A list counts only if it shows the replica's own last member write
//     that succeeded, and the replica takes no shard while its last list
//     does not (nor, after a write that did not answer but landed, until
//     one succeeds again): a list may be older than the instant it began
//     (on Leases, from a watch that has not yet delivered the latest
//     writes), and one that shows the replica's own last write shows
//     every write the store took before it. So of two replicas of
//     different counts, at least one sees the other (the one whose write
//     the store took last). Its member record is written one write at a
//     time, from its loop, each by version: a write that did not answer
//     cannot land after a later one (say, a renewal with the Yielded mark
//     after the write that took it out).
//   - Every write of a shard's elector that would begin a term here (one
//     naming this replica while its elector does not claim the shard)
//     passes the same test at the instant it is sent (the shard
//     backends' gate): an elector that was contending goes on by itself,
//     and must not win a shard its replica's last look forbids.
//   - A record of another count expires only once a list has seen it
//     unchanged for a lease, never while lists fail; a record that
//     vanished keeps what was last seen of it until that expires; a
//     shard record that names no holder but is not in the release shape
//     (emptied by hand) counts as held by an unknown count until it
//     expires, as the election waits it out.
//   - A leaving replica stops contending before its member record says
//     leaving, and its record stays live, saying leaving, until it holds
//     nothing: a replica of another count sees it while it holds
//     anything, even a shard whose record vanished.
package shardgroup
