// Package httpapi serves the sidecar's HTTP API.
//
// The app API (loopback by default) tells the application whether it leads
// and which fencing token to use:
//
//	GET  /                {"name": "<the holder's Pod name>"}, as the contrib leader-elector
//	GET  /leader          the state as JSON
//	GET  /leader/watch    Server-Sent Events: the state at once, then on every change
//	GET  /leader/ready    200 while leading, 503 otherwise
//	POST /leader/release  leader only: step down now and hold off; returns the
//	                      new state (409 Conflict on a standby, which changes nothing)
//	POST /leader/handoff  leader only: move leadership to {"to": "<identity or Pod
//	                      name>"} or, without a body, to any candidate that answers,
//	                      with the next token (election.Elector.Handoff); 200 with the
//	                      new state, 409 on a standby, 422 when no candidate took it
//	                      (nothing changed), 400 for another body, 503 on a store error
//	GET  /healthz         200 while the election loop is not wedged
//	GET  /readyz          200 once the store has been reached and the loop is healthy
//	GET  /metrics         Prometheus text format
//
// The JSON of GET /leader, of each /leader/watch event and of the answers
// to a release and a hand-off is fence.LeaderJSON, the one definition that the fence client,
// tests and tools read too.
//
// In shard mode (--shards N) the app API is NewShardsAppHandler's instead
// (shards.go): GET /shards, /shards/watch (the state, and a typed event
// per change of a shard's term: shardevents.go), /shards/{i},
// /shards/owner?key=K and POST /shards/{i}/drained, with the /leader paths answering 409 with an error
// that points to /shards.
//
// The ops API (for kubelet probes on the pod IP) serves only the read-only
// /healthz, /readyz, /leader/ready and /metrics.
//
// Guarantees: every answer is computed from memory at the moment it is
// made (the election's Status), never by a request to the store, so a slow
// or unreachable store cannot slow a read, and a leader that was paused
// answers "not leader" on its first answer after waking. A wrong method gets
// 405 with an Allow header, an unknown path 404.
//
// A POST changes the election, and a browser on the same machine can send
// one to 127.0.0.1 from any web page. So a POST is refused (403) when the
// browser marks it cross-origin (Sec-Fetch-Site, Origin), and, unless
// Options.AnyHost, when its Host header does not name a loopback host,
// which is what a page that rebinds its own DNS name to 127.0.0.1 sends.
// Clients that are not browsers pass. Reads are not checked.
package httpapi
