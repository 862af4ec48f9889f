// Package lease is a backend.Backend on a coordination.k8s.io/v1 Lease: the
// record of one election is the spec of one Lease on the Kubernetes API
// server, and so lives in etcd. The Backend is handed its client
// (Options.Client, from package kubeclient, which also finds the server
// and the namespace); it makes no connection of its own.
//
// # Guarantees
//
// Compare-and-swap is the Lease's metadata.resourceVersion. Get returns it
// as the backend.Version; Update sends a Lease carrying exactly the version
// passed in, so the API server stores it only if the Lease is still at that
// version and otherwise answers 409 Conflict, returned as
// backend.ErrConflict. Of any number of writers racing from one version,
// etcd lets exactly one through. The precondition is always the argument:
// the few objects a Backend remembers only supply metadata to keep.
//
// Every Update also carries the Lease's UID. Leases allow create-on-update,
// so without it a PUT on a deleted Lease would quietly create a new one;
// with it the write fails, and the caller finds the Lease gone on its next
// Get.
//
// The fencing token is spec.leaseTransitions (an int32: backend.CheckRecord
// rejects larger tokens before any request).
//
// # Mapping, and client-go interoperability
//
// Record and LeaseSpec correspond exactly as in client-go's
// tools/leaderelection/resourcelock (LeaderElectionRecordToLeaseSpec and
// LeaseSpecToLeaderElectionRecord):
//
//	HolderIdentity        spec.holderIdentity
//	LeaseDurationSeconds  spec.leaseDurationSeconds
//	AcquireTime           spec.acquireTime  (MicroTime, microseconds)
//	RenewTime             spec.renewTime    (MicroTime, microseconds)
//	Transitions           spec.leaseTransitions
//
// and both sides compare-and-swap on the same resourceVersion, so a
// client-go leaderelection candidate using a LeaseLock on the same Lease and
// a candidate on this backend read each other's records and exclude each
// other. A zero time is written as an absent field and an absent (or zero)
// time reads back as the zero time.Time, as with client-go. A record with
// LeaseDurationSeconds <= 0 is refused by the API server's validation, for
// both. How a hand-edited Lease with absent or odd fields reads is listed at
// recordFromSpec in mapping.go: absent fields are zero values, nothing
// panics.
//
// # What Update keeps
//
// Update writes the five fields above, and the record's hand-off marker as
// the annotation leader-sidecar.io/handoff (HandoffAnnotation: compact
// JSON, removed when the record carries none), its shard-group mark as
// the annotation leader-sidecar.io/shard-group (GroupAnnotation, likewise),
// and keeps everything else
// on the Lease: labels, other annotations, owner references,
// spec.strategy, spec.preferredHolder. client-go candidates neither read
// nor write the annotation; their writes keep it as they find it, and a
// marker left behind that way is inert (its token no longer matches the
// record's; see package election). It starts from the Lease as it was at the version
// passed in: the copy this Backend read or wrote at that version if it
// still has it, else a fresh Get, which must show that very version (or
// Update returns ErrConflict without writing). Create makes a Lease with
// only its name, namespace and spec.
//
// # Change signal
//
// Watch follows this one Lease (field selector metadata.name=<name>) with
// a plain watch and keeps only the last Lease it saw: no informer, no
// cache of other objects. It starts from the Lease's current state,
// streamed over the watch itself, survives watch timeouts and API server
// restarts (it resumes from the last resourceVersion), starts over and
// signals when that version has expired (a change may have been missed),
// backs off while the API server is unreachable, and sends no requests
// while idle apart from re-establishing its watch every five to ten
// minutes.
//
// With Options.SharedWatch (a shard group's Backends), the Backends of a
// process on one Client and one namespace share one such watch of every
// Lease of the namespace instead (namespacewatch.go), which keeps those
// Leases as it last saw them: one watch request at a time for any number
// of Backends. Each Watch still gets the signals of its own Lease alone,
// as above (its first state, each of its changes, every start over), and
// Snapshot is still its own Lease as its Watch last saw it: every Backend
// is served from the one stream in the API server's order, so its
// Snapshot never goes back to an older resourceVersion. Backends on
// different Clients never share a watch, so one watch never serves two
// sets of credentials.
//
// List (backend.Lister) of a Backend with SharedWatch answers from that
// watch, without a request, while it runs and is current: a watch request
// is open that follows on from a whole state of the namespace (streamed
// at its start, or listed on a server that cannot stream it). Its answer
// is as current as the stream: a Lease created, changed or deleted is in
// it once the event has arrived, a moment after the write. It is never
// made of two states: from a start over (the version to resume from has
// expired) until the new state is whole, between two watch requests and
// while the watch backs off, and when no Backend of the process is
// watching, List sends a list request as without SharedWatch (read from
// etcd, not a cache).
//
// # Errors and permissions
//
// Errors keep the API server's message behind the Lease and the operation,
// e.g. `lease team/db-leader: update: leases.coordination.k8s.io "db-leader"
// is forbidden: User "..." cannot update resource "leases" ...`, so a
// missing RBAC permission is named. The service account needs get, create
// and update on the Lease, and watch for Watch (list too on an API server
// that cannot stream a watch's initial state: Watch then lists first). A
// Role may limit get, update, list and watch to the Lease with
// resourceNames; create cannot be limited by name. A Backend with
// SharedWatch needs watch (and on such a server list) on every Lease of
// the namespace. List (backend.Lister, for a shard group's member Leases)
// needs list on every Lease of the namespace (with SharedWatch, for the
// times its watch cannot answer): it cannot be limited by name.
package lease
