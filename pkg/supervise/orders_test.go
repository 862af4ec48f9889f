//go:build unix

package supervise

import (
	"syscall"
	"testing"
	"time"
)

// A claim's end is counted from the instant the lock read its claim, on
// CLOCK_MONOTONIC: the time the line took to arrive (a lock stopped
// between reading its claim and writing the line, a guardian slow to
// read) is taken off, so the guardian's end is never later than the
// lock's.
func TestParseOrderCountsTheClaimFromWhenTheLockReadIt(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const at = int64(5_000_000_000) // the lock's CLOCK_MONOTONIC as it read its claim
	line := claimLine(2*time.Second, at)
	cases := []struct {
		name    string
		nowMono int64
		want    time.Time
	}{
		{"read at once", at, now.Add(2 * time.Second)},
		{"read 300ms later", at + int64(300*time.Millisecond), now.Add(1700 * time.Millisecond)},
		{"read after the claim ended", at + int64(3*time.Second), now.Add(-time.Second)},
		// Not on one machine's clock; never later for it.
		{"a reading before the lock's", at - int64(time.Second), now.Add(2 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseOrder(line, now, c.nowMono)
			if err != nil || o.kind != claimOrder || !o.until.Equal(c.want) {
				t.Fatalf("parseOrder(%q) = %+v, %v; want a claim until %v", line, o, err, c.want)
			}
		})
	}
}

func TestOrderLines(t *testing.T) {
	now := time.Now()
	for _, o := range []order{{kind: stopOrder}, {kind: signalOrder, sig: syscall.SIGTSTP}, {kind: signalOrder, sig: syscall.SIGCONT}} {
		got, err := parseOrder(orderLine(o), now, 0)
		if err != nil || got != o {
			t.Fatalf("%q read back as %+v, %v; want %+v", orderLine(o), got, err, o)
		}
	}
	for _, line := range []string{"", "\n", "claim\n", "claim 1\n", "claim x 2\n", "claim 1 y\n", "stop now\n", "signal\n", "signal 0\n",
		"signal -9\n", "signal TERM\n", "kill 9\n"} {
		if o, err := parseOrder(line, now, 0); err == nil {
			t.Errorf("%q read as %+v, want an error", line, o)
		}
	}
}
