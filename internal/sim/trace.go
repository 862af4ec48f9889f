package sim

import (
	"fmt"
	"time"
)

// trace keeps the last lines of a schedule: who believed what, when, and
// which store operations led there.
type trace struct {
	limit int
	ring  []string
	next  int
}

func (t *trace) add(at time.Duration, line string) {
	line = fmt.Sprintf("%10.3fs  %s", at.Seconds(), line)
	if len(t.ring) < t.limit {
		t.ring = append(t.ring, line)
		return
	}
	t.ring[t.next] = line
	t.next = (t.next + 1) % t.limit
}

func (t *trace) lines() []string {
	return append(append([]string(nil), t.ring[t.next:]...), t.ring[:t.next]...)
}
