//go:build linux

package supervise

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A process whose parent ends is re-parented to PID 1 of its PID
// namespace, which must reap it once it exits, or it stays a zombie for
// the namespace's life. When sidecar lock is PID 1 (a container whose
// entrypoint it is, without an init), that is the lock's job, as it is
// tini's. The lock's own children are not reaped here: their wait status
// belongs to whoever started them and waits for them (os/exec), and a
// reaper that took it would leave that waiter without it. They are:
//
//   - the processes this package started (the guardian), recorded in
//     ownChildren from before they exist until they are reaped;
//   - the processes in the lock's own process group: what the lock's
//     other code starts without a group of its own (a kubeconfig's
//     credential plugin).
//
// The reaper looks at each exited child without reaping it (waitid with
// WNOWAIT), and reaps it only if it is none of those.

// ownChildren records the pids of the processes this package started and has
// not yet reaped. The reaper holds it while it looks and reaps, and Start
// holds it from before the fork until the pid is recorded, so a child
// that exits at once is never taken for an orphan.
var ownChildren = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// startRecorded runs start (a fork) with ownChildren held and records the pid
// it returns; forget removes it once the process is reaped.
func startRecorded(start func() (pid int, err error)) error {
	ownChildren.Lock()
	defer ownChildren.Unlock()
	pid, err := start()
	if err == nil {
		ownChildren.pids[pid] = true
	}
	return err
}

func forget(pid int) {
	ownChildren.Lock()
	defer ownChildren.Unlock()
	delete(ownChildren.pids, pid)
}

// ReapOrphans makes this process reap the processes re-parented to it
// (see above) until stop is called. Call it when the process is PID 1.
func ReapOrphans() (stop func()) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var retry <-chan time.Time
			if reapOrphans() {
				// One of the lock's own children has exited and
				// is about to be reaped by its waiter; what may be
				// behind it is looked at again shortly.
				retry = time.After(ownChildRetry)
			}
			select {
			case <-chld:
			case <-retry:
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(chld)
		close(done)
		<-finished
	}
}

// ownChildRetry is how soon the reaper looks again when one of the lock's
// own exited children hides the others from it.
const ownChildRetry = 50 * time.Millisecond

// reapOrphans reaps the exited children that are not the lock's own, and
// reports whether an exited child of the lock's own kept it from looking
// further (waitid shows one exited child at a time).
func reapOrphans() (blocked bool) {
	ownChildren.Lock()
	defer ownChildren.Unlock()
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		pid := siginfoPid(&info)
		if err != nil || pid <= 0 {
			return false // no child, or none has exited
		}
		if ownChildren.pids[pid] || ownGroup(pid) {
			return true
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil && !errors.Is(err, syscall.EINTR) {
			return false
		}
	}
}

// ownGroup reports whether process pid, an exited child not yet reaped
// (its process group is kept until then), is in this process's group.
func ownGroup(pid int) bool {
	pgid, err := syscall.Getpgid(pid)
	return err == nil && pgid == syscall.Getpgrp()
}

// siginfoPid is si_pid of a siginfo that waitid filled: the first field of
// the union that follows si_signo, si_errno and si_code, which is aligned
// as a pointer (at 16 bytes on 64-bit systems, 12 on 32-bit ones).
func siginfoPid(info *unix.Siginfo) int {
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
