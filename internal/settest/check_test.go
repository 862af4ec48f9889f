package settest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// at builds an append of id by replica over [call, ret] ms that read the
// list read.
func at(replica int, id int64, outcome string, read []int64, call, ret int) op {
	return op{replica: replica, id: id, outcome: outcome, read: stateOf(read),
		call: time.Duration(call) * time.Millisecond, ret: time.Duration(ret) * time.Millisecond}
}

// final is the read of the final list at ms.
func final(list []int64, ms int) op {
	return op{replica: 9, outcome: finalRead, read: stateOf(list), call: time.Duration(ms) * time.Millisecond, ret: time.Duration(ms+1) * time.Millisecond}
}

// The checker on hand-made histories: what it must find and what it must
// let pass.
func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		history []op
		list    []int64
		want    Verdict
	}{
		{"appends one after the other", []op{
			at(0, 1, appendOK, nil, 0, 10),
			at(1, 2, appendRefused, nil, 5, 6),
			at(0, 3, appendOK, []int64{1}, 20, 30),
			final([]int64{1, 3}, 40),
		}, []int64{1, 3}, Verdict{Operations: 3, Acknowledged: 2, Refused: 1, Linearizable: porcupine.Ok}},
		{"a lost update: two appends read the same list", []op{
			at(0, 1, appendOK, nil, 0, 10),
			at(1, 2, appendOK, nil, 5, 15),
			final([]int64{2}, 40),
		}, []int64{2}, Verdict{Operations: 2, Acknowledged: 2, Lost: 1, Linearizable: porcupine.Illegal}},
		{"an append of unknown outcome that took effect", []op{
			at(0, 1, appendUnknown, nil, 0, 10),
			at(1, 2, appendOK, []int64{1}, 20, 30),
			final([]int64{1, 2}, 40),
		}, []int64{1, 2}, Verdict{Operations: 2, Acknowledged: 1, Unknown: 1, Linearizable: porcupine.Ok}},
		{"an append of unknown outcome that did not", []op{
			at(0, 1, appendUnknown, nil, 0, 10),
			at(1, 2, appendOK, nil, 20, 30),
			final([]int64{2}, 40),
		}, []int64{2}, Verdict{Operations: 2, Acknowledged: 1, Unknown: 1, Linearizable: porcupine.Ok}},
		{"a refused append in the list", []op{
			at(0, 1, appendRefused, nil, 0, 10),
			final([]int64{1}, 40),
		}, []int64{1}, Verdict{Operations: 1, Refused: 1, Phantom: 1, Linearizable: porcupine.Illegal}},
		{"an id twice", []op{
			at(0, 1, appendOK, nil, 0, 10),
			final([]int64{1, 1}, 40),
		}, []int64{1, 1}, Verdict{Operations: 1, Acknowledged: 1, Duplicated: 1, Linearizable: porcupine.Illegal}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Run{history: c.history, faults: map[string]int{}}
			if got := r.Check(c.list, time.Minute); got != c.want {
				t.Errorf("got  %v\nwant %v", got, c.want)
			}
			if violated := c.want.Linearizable != porcupine.Ok; c.want.Violated() != violated {
				t.Errorf("Violated() = %v, want %v", c.want.Violated(), violated)
			}
		})
	}
}
