package shard

import "testing"

// TestStanceOf is the rule between counts, row by row as count.go states
// it.
func TestStanceOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		count  int
		others []OtherCount
		want   Stance
	}{
		{"alone", 4, nil, Open},
		{"only its own count", 4, []OtherCount{{Count: 4}, {Count: 4, Holder: true}}, Open},
		{"a larger member: yield", 2, []OtherCount{{Count: 4}}, Yield},
		{"a larger member that yielded itself: yield", 2, []OtherCount{{Count: 4, Yielded: true}}, Yield},
		{"a larger holder: yield", 2, []OtherCount{{Count: 4, Holder: true}}, Yield},
		{"larger and smaller: yield", 4, []OtherCount{{Count: 2}, {Count: 8}}, Yield},
		{"a smaller member not yielded: wait", 4, []OtherCount{{Count: 2}}, Wait},
		{"a smaller member yielded: open", 4, []OtherCount{{Count: 2, Yielded: true}}, Open},
		{"a smaller holder: wait, its member yielded or not", 4, []OtherCount{{Count: 2, Yielded: true}, {Count: 2, Holder: true}}, Wait},
		{"an unmarked member never yields: wait", 4, []OtherCount{{Count: 0}}, Wait},
		{"a rollback: the smaller new count yields to the old", 2, []OtherCount{{Count: 4, Holder: true}, {Count: 4}}, Yield},
		{"the old larger count waits for nothing it yielded", 4, []OtherCount{{Count: 2, Yielded: true}, {Count: 2, Yielded: true}}, Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StanceOf(tc.count, tc.others); got != tc.want {
				t.Errorf("StanceOf(%d, %+v) = %v, want %v", tc.count, tc.others, got, tc.want)
			}
		})
	}
}

// TestStanceNeverBlocksBothSides: of two counts that see each other, the
// larger never yields, and opens once the smaller has yielded; the
// smaller yields: no pair of counts waits on each other.
func TestStanceNeverBlocksBothSides(t *testing.T) {
	for _, a := range []int{0, 1, 2, 4, 8} {
		for _, b := range []int{0, 1, 2, 4, 8} {
			if a == b {
				continue
			}
			big, small := max(a, b), min(a, b)
			if got := StanceOf(big, []OtherCount{{Count: small, Yielded: true}}); got != Open {
				t.Errorf("count %d seeing count %d yielded: %v, want open", big, small, got)
			}
			if got := StanceOf(small, []OtherCount{{Count: big}}); got != Yield {
				t.Errorf("count %d seeing count %d: %v, want yielding", small, big, got)
			}
		}
	}
}
