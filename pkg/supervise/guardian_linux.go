//go:build linux

package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// On Linux, sidecar lock does not start CMD itself: it starts itself
// again as CMD's guardian, and the guardian starts CMD. The kernel's
// parent-death signal reaches one process, not the processes it started,
// so a lock killed outright (SIGKILL, the OOM killer) could take CMD with
// it but not what CMD started (a shell's background job, a script's
// commands), and those would run on beside the next leader's CMD. The
// guardian is what the parent-death signal can reach and that then acts:
//
//   - The lock starts the guardian in a process group of its own (a
//     signal to the lock's group, or GNU timeout's, does not reach it),
//     with guardianDeathSignal as its parent-death signal, from the
//     thread locked for the guardian's life.
//   - The guardian starts CMD in a new process group, with SIGKILL as
//     CMD's parent-death signal, and tells the lock CMD's pid (the
//     group's id, which the lock signals as it signals CMD today) or why
//     CMD could not start.
//   - When its parent is no longer the lock that started it, the
//     guardian SIGKILLs CMD's whole group and exits. It looks at every
//     guardianDeathSignal and once its handler is set up, so a lock that
//     died before that is not missed either (the kernel sends the signal
//     only to a child alive when the parent dies).
//   - When CMD exits, the guardian kills what is left of CMD's group
//     before reaping CMD, then tells the lock CMD's wait status, and
//     exits with CMD's exit status.
//
// If the guardian itself is killed, CMD gets SIGKILL from the kernel and
// the lock kills what is left of CMD's group once the guardian is gone.
// What CMD started and moved out of its process group (setsid, setpgid)
// is not reached.

// guardianDeathSignal is what the kernel sends the guardian when the lock
// dies. The guardian catches it and then checks its parent.
const guardianDeathSignal = syscall.SIGTERM

// guardianReportsFD is the pipe the guardian writes its reports to, one
// line each: "started <pid>", "failed <status> <error>" or
// "exited <wait status>".
const guardianReportsFD = 3

// Start starts CMD through a guardian (see above). It returns once CMD
// runs, or with a *CommandError if CMD could not start.
//
// The guardian is started, and waited for, from one goroutine locked to
// its OS thread: the parent-death signal fires when the thread that forked
// the guardian ends, not the process, and the Go runtime may end an idle
// thread.
func Start(cmd Command) (*Child, error) {
	reports, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the command's guardian: %w", err)
	}
	g := &exec.Cmd{
		// The running binary, even if its file was replaced since.
		Path:       "/proc/self/exe",
		Args:       append([]string{os.Args[0], GuardianArg, strconv.Itoa(os.Getpid()), "--", cmd.Path}, cmd.Args...),
		Env:        cmd.Env,
		Stdin:      cmd.Stdin,
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{w}, // guardianReportsFD
		WaitDelay:  time.Second,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: guardianDeathSignal,
		},
	}
	c := &Child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer reports.Close()
		// Never unlocked: the thread ends with the goroutine, after the
		// guardian.
		runtime.LockOSThread()
		err := startRecorded(func() (int, error) {
			if err := g.Start(); err != nil {
				return 0, err
			}
			return g.Process.Pid, nil
		})
		_ = w.Close() // the guardian has its own copy
		if err != nil {
			started <- fmt.Errorf("starting the command's guardian: %w", err)
			return
		}
		r := bufio.NewReader(reports)
		first, _ := r.ReadString('\n')
		pid, err := parseStarted(first)
		if err == nil {
			c.pid = pid
		}
		started <- err
		var last string
		if err == nil {
			last, _ = r.ReadString('\n') // until the guardian exits
		}
		_ = g.Wait()
		forget(g.Process.Pid)
		c.state = g.ProcessState
		if ws, ok := parseExited(last); ok {
			c.status, c.groupKilled = waitStatusExit(ws), true
		} else {
			// The guardian died before CMD did: the kernel killed CMD,
			// and killLeftovers kills what is left of its group.
			c.status = exitStatus(g.ProcessState)
		}
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// parseStarted reads the guardian's first report: CMD's pid, or why it
// could not start (a *CommandError).
func parseStarted(line string) (int, error) {
	line = strings.TrimSuffix(line, "\n")
	if s, ok := strings.CutPrefix(line, "started "); ok {
		if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
			return pid, nil
		}
	}
	if s, ok := strings.CutPrefix(line, "failed "); ok {
		status, msg, _ := strings.Cut(s, " ")
		return 0, &CommandError{startFailure{msg: msg, notFound: status == "127"}}
	}
	return 0, fmt.Errorf("the command's guardian ended before it started the command (report %q)", line)
}

func parseExited(line string) (syscall.WaitStatus, bool) {
	s, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "exited ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return syscall.WaitStatus(n), err == nil
}

// startFailure is why the guardian could not start CMD, as it reported
// it; it is fs.ErrNotExist if CMD was not found (exit status 127).
type startFailure struct {
	msg      string
	notFound bool
}

func (e startFailure) Error() string { return e.msg }

func (e startFailure) Unwrap() error {
	if e.notFound {
		return fs.ErrNotExist
	}
	return nil
}

// RunGuardian is the guardian: args are the lock's pid, "--", CMD's path
// and CMD's arguments (argv[0] first). It returns its exit status: CMD's;
// 2 if it was not started by a lock (no report pipe); 1 if the lock died.
func RunGuardian(args []string) int {
	lockPid, path, argv, ok := guardianArgs(args)
	var st syscall.Stat_t
	if !ok || syscall.Fstat(guardianReportsFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		fmt.Fprintf(os.Stderr, "sidecar: %v\n", errNotForUse)
		return 2
	}
	syscall.CloseOnExec(guardianReportsFD) // CMD must not hold the pipe
	reports := os.NewFile(guardianReportsFD, "reports")
	// Until here the parent-death signal ends the guardian, before it
	// started anything; from here on it is caught, and a lock that died
	// before is seen by the check that follows.
	guardianPauseAt("before-handler")
	lockGone := make(chan os.Signal, 1)
	signal.Notify(lockGone, guardianDeathSignal)
	if os.Getppid() != lockPid {
		return 1
	}
	guardianPauseAt("before-start")
	c, err := startCommand(path, argv, os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		var ce *CommandError
		status := 126
		if errors.As(err, &ce) {
			status = ce.ExitStatus()
		}
		fmt.Fprintf(reports, "failed %d %s\n", status, strings.ReplaceAll(err.Error(), "\n", " "))
		return status
	}
	fmt.Fprintf(reports, "started %d\n", c.pid)
	for {
		// The lock died (before or after CMD started): nothing of CMD
		// may run on unsupervised.
		if os.Getppid() != lockPid {
			killGroup(c.pid)
			<-c.done
			return 1
		}
		select {
		case <-c.done:
			if ws, ok := c.state.Sys().(syscall.WaitStatus); ok {
				fmt.Fprintf(reports, "exited %d\n", uint32(ws))
			}
			return c.status
		case <-lockGone:
			// Another SIGTERM while the lock lives (sent to the
			// guardian alone): the lock decides what CMD gets.
		}
	}
}

// guardianArgs parses "<lock pid> -- <path> <argv0> [args...]". The lock
// may be PID 1 (a container's entrypoint): when PID 1 of a PID namespace
// dies, the kernel kills every process left in it, CMD's group too.
func guardianArgs(args []string) (lockPid int, path string, argv []string, ok bool) {
	if len(args) < 4 || args[1] != "--" {
		return 0, "", nil, false
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid < 1 {
		return 0, "", nil, false
	}
	return pid, args[2], args[3:], true
}
