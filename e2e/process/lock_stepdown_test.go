package process

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// POST /leader/release and /leader/handoff on a sidecar lock stop its CMD
// first (SIGTERM, SIGKILL after --kill-grace, reaped), and only then move
// leadership: a standby lock's CMD never runs beside it. Both CMDs ignore
// SIGTERM, so the first one runs until the SIGKILL.
func TestLockStopsTheCommandBeforeItReleasesOrHandsOff(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"release", "handoff"} {
		t.Run(how, func(t *testing.T) {
			db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
			first := startLock(t, stubbornScript(j), "--sqlite-path", db)
			started := j.Await(t, "start", 10*time.Second)
			second := startLock(t, stubbornScript(j), "--sqlite-path", db)
			holder := sidecartest.IdentityOf(t, first)
			sidecartest.WaitTrue(t, "the second lock sees the first as holder", 10*time.Second, func() bool {
				st, err := second.Leader()
				return err == nil && st.Holder == holder
			})
			runs := j.SampleRuns(t, 5*time.Millisecond)

			asked := time.Now()
			var code int
			var st sidecartest.State
			if how == "release" {
				code, st = release(t, first)
			} else {
				var err error
				if code, st, err = first.Handoff(""); err != nil {
					t.Fatal(err)
				}
			}
			answered := time.Since(asked)
			if code != http.StatusOK || st.Leader {
				t.Fatalf("POST /leader/%s: %d %+v, want 200 and leader false", how, code, st)
			}
			exit := first.WaitExit(10 * time.Second)
			// The second lock's CMD starts, in a term other than the first's.
			next := j.AwaitOtherTerm(t, "start", started, 10*time.Second)
			time.Sleep(200 * time.Millisecond) // samples with the second CMD alone
			n := runs.Check(t, 50)
			if exit != 128+9 {
				t.Fatalf("the first lock: exit status %d, want CMD's 137 (SIGKILL after --kill-grace):\n%s", exit, first.Logs())
			}
			word := map[string]string{"release": `"reason":"released`, "handoff": `"reason":"handed off`}[how]
			if !strings.Contains(first.Logs(), word) {
				t.Fatalf("the first lock's logs do not say %s:\n%s", word, first.Logs())
			}
			t.Logf("%s answered after %v; the second CMD (token %d) started %v after the first's (token %d) start line; %d samples, 0 with both running",
				how, answered.Round(time.Millisecond), next.Token, next.At.Sub(started.At).Round(time.Millisecond), started.Token, n)
		})
	}
}
