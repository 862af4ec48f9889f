package sidecartest

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that exits while a child it started still holds its stderr
// (a lock's command, orphaned) is done once it has exited and its logs
// are read, not when the child lets go of the pipe.
func TestProcIsDoneWhileAChildHoldsItsLogs(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sleep 300 & echo $! >&2; echo '{"msg":"bye"}' >&2; exit 3`)
	p, err := StartProc(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	t.Cleanup(func() {
		if child > 0 {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("Done never closed while the orphaned child held stderr")
	}
	lines := strings.Split(strings.TrimSpace(p.Logs()), "\n")
	if len(lines) != 2 || lines[1] != `{"msg":"bye"}` {
		t.Fatalf("logs %q, want the child's pid and the last line", p.Logs())
	}
	if _, err := fmt.Sscan(lines[0], &child); err != nil || syscall.Kill(child, 0) != nil {
		t.Fatalf("the child %q should still run: %v", lines[0], err)
	}
	if code := p.ProcessState().ExitCode(); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
}
