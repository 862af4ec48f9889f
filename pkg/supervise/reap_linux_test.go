package supervise

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The reaper reaps what is orphaned to this process, and never the wait
// status of a child of its own: CMD started by this package, or a process
// started by other code in this process's group (os/exec, as a credential
// plugin is). The test process is made a child subreaper, so what its
// children orphan is re-parented to it as it would be to PID 1.
func TestReapOrphansTakesNoStatusOfItsOwnChildren(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()
	stop := ReapOrphans()
	defer stop()

	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan string, 2*rounds)
	for range rounds {
		wg.Add(2)
		go func() { // CMD, which this package started and waits for, leaves jobs behind
			defer wg.Done()
			c, err := startCommand("/bin/sh", []string{"sh", "-c", "(true &); (sleep 0.01 &); exit 3"}, nil, nil, nil, nil)
			if err != nil {
				errs <- "CMD: " + err.Error()
				return
			}
			<-c.Done()
			if got := c.ExitStatus(); got != 3 {
				errs <- "CMD's exit status: " + strconv.Itoa(got)
			}
		}()
		go func() { // other code's child, in this process's group
			defer wg.Done()
			if err := exec.Command("sh", "-c", "exit 5").Run(); err == nil || !strings.Contains(err.Error(), "exit status 5") {
				errs <- "own group's child: " + errString(err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// Every orphan has exited within a few ms; none is left a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for zombies(os.Getpid()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := zombies(os.Getpid()); n > 0 {
		t.Fatalf("%d zombie children left", n)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// zombies counts the exited children of pid that wait to be reaped.
func zombies(pid int) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) >= 2 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}
