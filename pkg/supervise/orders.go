package supervise

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The lock's orders reach the guardian as lines on a pipe (see
// guardian_linux.go):
//
//	claim <d> <at>   the claim ends d nanoseconds after at
//	stop             the claim ends now
//	signal <n>       pass signal n on to CMD's group
//
// A claim's end is never a wall-clock time, which another process could
// read otherwise (and which may jump): it is a duration, valid from the
// instant the lock read its claim, that instant given as a reading of
// CLOCK_MONOTONIC, one clock for every process of the machine (of the
// time namespace, which the guardian shares with the lock). The guardian
// counts d from at on its own reading of that clock, so a line that waited
// in the pipe, or a lock stopped between reading its claim and writing the
// line, never moves the end later than the lock's own.

// claimLine is the order "the claim ends d after at" (at on
// CLOCK_MONOTONIC, in nanoseconds).
func claimLine(d time.Duration, at int64) string {
	return fmt.Sprintf("claim %d %d\n", int64(d), at)
}

// orderLine is the line of a stop or signal order.
func orderLine(o order) string {
	if o.kind == signalOrder {
		return fmt.Sprintf("signal %d\n", int(o.sig))
	}
	return "stop\n"
}

// parseOrder reads one order line. now and nowMono are this process's
// clock and CLOCK_MONOTONIC, read in that order as the line was read: a
// claim ends at now plus d minus the time since the lock read it (never
// less than none).
func parseOrder(line string, now time.Time, nowMono int64) (order, error) {
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "claim":
		d, err1 := strconv.ParseInt(f[1], 10, 64)
		at, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			break
		}
		age := max(nowMono-at, 0)
		return order{kind: claimOrder, until: now.Add(time.Duration(d - age))}, nil
	case len(f) == 1 && f[0] == "stop":
		return order{kind: stopOrder}, nil
	case len(f) == 2 && f[0] == "signal":
		n, err := strconv.Atoi(f[1])
		if err != nil || n <= 0 {
			break
		}
		return order{kind: signalOrder, sig: syscall.Signal(n)}, nil
	}
	return order{}, fmt.Errorf("not an order: %q", line)
}
