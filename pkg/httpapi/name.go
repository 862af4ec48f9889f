package httpapi

import (
	"net/http"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// LeaderName is the JSON body of GET /, the answer of the retired contrib
// leader-elector image (gcr.io/google_containers/leader-elector), so that
// an application written for it only needs a new image.
type LeaderName struct {
	// Name is the Pod name of the holder the record names, as last seen
	// (also on standbys): its identity without the suffix the sidecar adds
	// at every start (see election.IdentityPrefix). "" when nobody holds
	// the record.
	Name string `json:"name"`
}

// leaderName answers GET / (only "/", unlike the contrib image, which
// answered on every path).
func (a *api) leaderName(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, LeaderName{Name: election.IdentityPrefix(a.e.Status().Holder)})
}
