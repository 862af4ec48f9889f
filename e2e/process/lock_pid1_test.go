package process

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// sidecar lock as PID 1 of a PID namespace, as the entrypoint of a
// container without an init: it leads, runs CMD, and exits with CMD's
// status; and as PID 1 it reaps what is orphaned to it. CMD leaves a
// process behind in a subshell (orphaned at once, so re-parented to PID
// 1, the lock) that exits while CMD still runs: the lock reaps it, and
// no zombie is left. It needs root and unshare (util-linux), and fails
// without them.
func TestLockAsPID1RunsTheCommandAndReapsOrphans(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root to make a PID namespace (unshare --pid); run the suite as root (CI does)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("this test needs unshare (util-linux) to make a PID namespace: %v", err)
	}
	db, j := sidecartest.DBPath(t), sidecartest.NewJournal(t)
	const orphanLife, cmdLife = 500 * time.Millisecond, 4 * time.Second
	script := fmt.Sprintf("%s; (sleep %g &); sleep %g; exit 7", j.Line("start"), orphanLife.Seconds(), cmdLife.Seconds())
	args := append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", sidecartest.Binary(t)}, lockArgs(script, "--sqlite-path", db)...)
	cmd := exec.Command(unshare, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	ns := sidecartest.Track(t, cmd)

	started := j.Await(t, "start", 10*time.Second)
	if started.Token != 1 {
		t.Fatalf("CMD ran with token %d, want 1", started.Token)
	}
	var lock int
	if children := sidecartest.ChildrenOf(ns.Pid()); len(children) == 1 {
		lock = children[0]
	} else {
		t.Fatalf("unshare's children: %v, want the lock alone", children)
	}
	var orphan int
	sidecartest.WaitTrue(t, "CMD's orphan is re-parented to the lock", time.Second, func() bool {
		for _, pid := range sidecartest.ChildrenOf(lock) {
			if comm(pid) == "sleep" {
				orphan = pid
				return true
			}
		}
		return false
	})
	// The orphan exits after orphanLife; the lock reaps it as it does.
	reaped := func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", orphan))
		return os.IsNotExist(err)
	}
	for deadline := time.Now().Add(orphanLife + 2*time.Second); !reaped() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if zombies := sidecartest.ZombiesOf(lock); !reaped() || len(zombies) != 0 {
		t.Fatalf("the orphan %d was not reaped: the lock's zombie children %v", orphan, zombies)
	}
	if !ns.Alive() {
		t.Fatalf("the lock exited before its CMD did:\n%s", ns.Logs())
	}
	if code := ns.WaitExit(cmdLife + 10*time.Second); code != 7 {
		t.Fatalf("exit status %d, want CMD's 7:\n%s", code, ns.Logs())
	}
	t.Logf("as PID 1 the lock ran CMD (token %d), reaped its orphan %d, and exited with CMD's status", started.Token, orphan)
}

// comm is the command name of process pid, "" if it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
