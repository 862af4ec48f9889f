package sidecartest

import (
	"testing"
	"time"
)

// TestTwoLeaderSweepsCountsOnlyWhatHeldAtOnce: in one sweep, a token
// claimed by two members counts, and so does an older term asked for
// after a newer term had answered; an older term answered before or while
// the newer term was asked (a hand-off between the two requests) does not.
func TestTwoLeaderSweepsCountsOnlyWhatHeldAtOnce(t *testing.T) {
	at := time.Unix(1000, 0)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	for _, c := range []struct {
		name   string
		claims []Claim
		want   int
	}{
		{"one token, two members", []Claim{{"a", Term{Token: 3}, 0, ms(0), ms(5)}, {"b", Term{Token: 3}, 0, ms(0), ms(9)}}, 1},
		{"the older asked after the newer answered", []Claim{{"b", Term{Token: 4}, 0, ms(0), ms(2)}, {"a", Term{Token: 3}, 0, ms(3), ms(4)}}, 1},
		{"windows that overlap: a hand-off between", []Claim{{"a", Term{Token: 3}, 0, ms(0), ms(8)}, {"b", Term{Token: 4}, 0, ms(0), ms(12)}}, 0},
		{"the older answered first", []Claim{{"a", Term{Token: 3}, 0, ms(0), ms(1)}, {"b", Term{Token: 4}, 0, ms(2), ms(3)}}, 0},
		{"two sweeps", []Claim{{"a", Term{Token: 3}, 0, ms(0), ms(1)}, {"b", Term{Token: 4}, 1, ms(0), ms(1)}}, 0},
		{"one member twice", []Claim{{"a", Term{Token: 3}, 0, ms(0), ms(1)}, {"a", Term{Token: 3}, 0, ms(2), ms(3)}}, 0},
	} {
		var l ClaimLog
		for _, cl := range c.claims {
			l.Add(cl)
		}
		if got := l.TwoLeaderSweeps(); got != c.want {
			t.Errorf("%s: %d sweeps with two leaders, want %d", c.name, got, c.want)
		}
	}
}
