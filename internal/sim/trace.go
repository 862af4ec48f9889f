package sim

import (
	"fmt"
	"time"
)

// trace keeps the last lines of a schedule: who believed what, when, and
// which store operations led there. A line is formatted only when the
// trace is read: most are overwritten unread.
type trace struct {
	limit int
	ring  []traceLine
	next  int
}

// traceLine is a line not yet formatted. Its arguments are values (or
// hold no state that changes later), so formatting it later prints what
// formatting it at once would have.
type traceLine struct {
	at     time.Duration
	format string
	args   []any
}

func (t *trace) add(at time.Duration, format string, args []any) {
	line := traceLine{at, format, args}
	if len(t.ring) < t.limit {
		t.ring = append(t.ring, line)
		return
	}
	t.ring[t.next] = line
	t.next = (t.next + 1) % t.limit
}

func (t *trace) lines() []string {
	out := make([]string, 0, len(t.ring))
	for _, l := range append(t.ring[t.next:len(t.ring):len(t.ring)], t.ring[:t.next]...) {
		out = append(out, fmt.Sprintf("%10.3fs  %s", l.at.Seconds(), fmt.Sprintf(l.format, l.args...)))
	}
	return out
}
