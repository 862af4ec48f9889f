package fence

import "time"

// LeaderJSON is the JSON body of the sidecar's GET /leader and of each
// GET /leader/watch event. It is the one definition of that JSON: the
// sidecar writes it, and Client, the sidecar's tests and its tools read
// it. A reader must ignore fields it does not know, so that fields can be
// added; Client does.
//
// Example, from a leader:
//
//	{"leader":true,"identity":"web-0_0b1e…","holder":"web-0_0b1e…","token":3,
//	 "validUntil":"2026-11-29T18:45:15.675238Z","validForMs":9874,
//	 "lease":"default/billing","backend":"lease","appHealthy":null}
type LeaderJSON struct {
	// Leader is true while this replica may act as leader.
	Leader bool `json:"leader"`
	// Identity is the sidecar's candidate identity, new at every start:
	// "<prefix>_<random suffix>", the prefix being --identity, else
	// POD_NAME, else the hostname.
	Identity string `json:"identity"`
	// Holder is the identity the store names as holder, as last seen; ""
	// after a release.
	Holder string `json:"holder"`
	// Token is the fencing token of the term; null unless Leader.
	Token *int64 `json:"token"`
	// ValidUntil is when the claim lapses unless renewed, on the sidecar's
	// wall clock, in RFC 3339 with up to nanoseconds; null unless Leader.
	ValidUntil *time.Time `json:"validUntil"`
	// ValidForMs is ValidUntil as a duration: the whole milliseconds from
	// the moment the answer was made until ValidUntil (rounded down, never
	// negative); null unless Leader. For clients that cannot parse
	// nanosecond RFC 3339, or whose clock is not the sidecar's: add it to
	// the time the request was sent.
	ValidForMs *int64 `json:"validForMs"`
	// Lease names what is elected: "<namespace>/<name>" of a Lease, the
	// election's name in SQLite.
	Lease string `json:"lease"`
	// Backend names the store: "lease" or "sqlite".
	Backend string `json:"backend"`
	// AppHealthy is the verdict of the sidecar's check of its app
	// (--app-health-url): false while the app is unhealthy, when the
	// replica neither leads nor contends; null when no check is set.
	AppHealthy *bool `json:"appHealthy"`
	// Error is set only on answers to POST /leader/release that did not
	// release: on a standby (409 Conflict), or when the release could not
	// be written (503; the sidecar has stepped down regardless); and on
	// answers to POST /leader/handoff that did not hand off (409 on a
	// standby, 422 when no candidate took it, 400 for a bad body, 503).
	Error string `json:"error,omitempty"`
}

// WithTerm is j as a leader's answer made at now: leader true, the term's
// token, validUntil (in UTC) and validForMs counted from now.
func (j LeaderJSON) WithTerm(token int64, validUntil, now time.Time) LeaderJSON {
	until := validUntil.UTC()
	forMs := max(0, validUntil.Sub(now).Milliseconds())
	j.Leader, j.Token, j.ValidUntil, j.ValidForMs = true, &token, &until, &forMs
	return j
}
