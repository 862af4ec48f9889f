package httpapi

import (
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// An answer made after the claim it was read with has ended claims
// nothing: the status was read, the process paused, and the answer is
// made on waking.
func TestStateClaimsNothingPastValidUntil(t *testing.T) {
	read := time.Now()
	s := election.Status{Leader: true, Identity: "a_1", Holder: "a_1", Token: 3, ValidUntil: read.Add(2 * time.Second)}
	if st := newState(s, Info{}, read.Add(time.Second), nil); !st.Leader || st.Token == nil || *st.Token != 3 {
		t.Fatalf("within the claim: %+v, want leader with token 3", st)
	}
	for _, late := range []time.Duration{2 * time.Second, 3500 * time.Millisecond} {
		if st := newState(s, Info{}, read.Add(late), nil); st.Leader || st.Token != nil || st.ValidUntil != nil {
			t.Errorf("%v after the status was read, its claim ended at 2s: %+v, want no claim", late, st)
		}
	}
}
