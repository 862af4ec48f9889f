package fence

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// The wire names are the contract with every client, in any language.
func TestLeaderJSONFieldNames(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 45, 5, 0, time.FixedZone("CET", 3600))
	for name, c := range map[string]struct {
		j    LeaderJSON
		keys []string
	}{
		"leader":   {LeaderJSON{Identity: "a_1", Holder: "a_1"}.WithTerm(3, now.Add(10*time.Second), now), nil},
		"follower": {LeaderJSON{Identity: "b_2", Holder: "a_1"}, nil},
		"refused":  {LeaderJSON{Identity: "b_2", Error: "not the leader"}, []string{"error"}},
	} {
		body, err := json.Marshal(c.j)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		want := append([]string{"appHealthy", "backend", "holder", "identity", "leader", "lease", "token", "validForMs", "validUntil"}, c.keys...)
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("%s: keys %v, want %v", name, keys, want)
		}
	}
}

func TestWithTermSetsTheTermAndValidForMs(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 45, 5, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		left time.Duration
		want int64
	}{{10 * time.Second, 10000}, {1999999 * time.Microsecond, 1999}, {999 * time.Microsecond, 0}, {-time.Second, 0}} {
		j := LeaderJSON{Identity: "a_1"}.WithTerm(7, now.Add(c.left), now)
		if !j.Leader || *j.Token != 7 || *j.ValidForMs != c.want || !j.ValidUntil.Equal(now.Add(c.left)) || j.ValidUntil.Location() != time.UTC {
			t.Errorf("%v left: leader %v token %d validForMs %d validUntil %v, want 7, %d and %v in UTC",
				c.left, j.Leader, *j.Token, *j.ValidForMs, j.ValidUntil, c.want, now.Add(c.left))
		}
	}
}

// What the server marshals, the client reads; fields it does not know are
// ignored, so the sidecar can add some.
func TestDecodeStateReadsLeaderJSON(t *testing.T) {
	now := time.Now()
	body, err := json.Marshal(LeaderJSON{Identity: "a_1", Holder: "a_1", Lease: "l", Backend: "sqlite"}.WithTerm(4, now.Add(time.Second), now))
	if err != nil {
		t.Fatal(err)
	}
	s, err := decodeState(body)
	if err != nil || !s.Leader || s.Token != 4 || s.Identity != "a_1" || !s.ValidUntil.Equal(now.Add(time.Second)) || s.Lease != "l" {
		t.Fatalf("decoded %+v, %v", s, err)
	}
	extra := append(body[:len(body)-1:len(body)-1], `,"newField":{"x":[1,2]},"validForMs2":"soon"}`...)
	if s2, err := decodeState(extra); err != nil || s2.Token != 4 {
		t.Fatalf("with unknown fields: %+v, %v", s2, err)
	}
	if _, err := decodeState([]byte(`{"identity":"a_1","validForMs":5}`)); err == nil {
		t.Fatal("a body without leader decoded")
	}
}
