//go:build linux

package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux, sidecar lock does not start CMD itself: it starts itself
// again as CMD's guardian, and the guardian starts CMD. The kernel's
// parent-death signal reaches one process, not the processes it started,
// so a lock killed outright (SIGKILL, the OOM killer) could take CMD with
// it but not what CMD started (a shell's background job, a script's
// commands), and those would run on beside the next leader's CMD. The
// guardian is what the parent-death signal can reach and that then acts;
// and as a process of its own, which job control does not stop with the
// lock, it enforces the lock's claim whatever becomes of the lock:
//
//   - The lock starts the guardian in a process group of its own (a
//     signal to the lock's group, or GNU timeout's, does not reach it),
//     with guardianDeathSignal as its parent-death signal, from the
//     thread locked for the guardian's life. The lock's first claim is
//     in the orders pipe before the guardian starts.
//   - The guardian reads that claim and starts CMD only if it has not
//     ended, in a new process group, with SIGKILL as CMD's parent-death
//     signal; it tells the lock CMD's pid (the group's id) or why CMD
//     could not start.
//   - The lock tells the guardian each new end of its claim, when to stop
//     CMD at once, and which signals to pass on to CMD's group (orders.go).
//     The guardian alone signals CMD's group. When the claim it last
//     heard of ends, it stops CMD (SIGTERM, SIGCONT, SIGKILL after the
//     kill grace; claim.go), whether the lock is dead, stopped, starved
//     or slow.
//   - When its parent is no longer the lock that started it, or the
//     orders pipe ends (only the lock holds its other end), the guardian
//     SIGKILLs CMD's whole group. It looks at its parent at every
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
// line each: "started <pid>", "failed <status> <error>" or "lapsed" (the
// claim ended before CMD started) first; then "event <n>" for what it did
// on its own (claim.go's events); "exited <wait status>" last.
const guardianReportsFD = 3

// guardianOrdersFD is the pipe the guardian reads the lock's orders from
// (orders.go), the first claim first.
const guardianOrdersFD = 4

// orderTimeout bounds the lock's write of one order: a guardian that
// takes no orders for that long (stopped itself) is bypassed.
const orderTimeout = time.Second

// Start starts CMD through a guardian (see above), the claim ending at
// validUntil. It returns once CMD runs, or with a *CommandError if CMD
// could not start, or ErrClaimEnded.
//
// The guardian is started, and waited for, from one goroutine locked to
// its OS thread: the parent-death signal fires when the thread that forked
// the guardian ends, not the process, and the Go runtime may end an idle
// thread.
func Start(cmd Command, validUntil time.Time) (*Child, error) {
	reports, reportsW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the command's guardian: %w", err)
	}
	ordersR, orders, err := os.Pipe()
	if err != nil {
		reports.Close()
		reportsW.Close()
		return nil, fmt.Errorf("starting the command's guardian: %w", err)
	}
	c := &Child{done: make(chan struct{})}
	t := &guardianOrders{w: orders, grace: cmd.KillGrace, c: c, log: cmd.Log}
	c.tell = t.send
	t.send(order{kind: claimOrder, until: validUntil})
	g := &exec.Cmd{
		// The running binary, even if its file was replaced since.
		Path: "/proc/self/exe",
		Args: append([]string{os.Args[0], GuardianArg, strconv.Itoa(os.Getpid()), cmd.KillGrace.String(), "--", cmd.Path},
			cmd.Args...),
		Env:        cmd.Env,
		Stdin:      cmd.Stdin,
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{reportsW, ordersR}, // guardianReportsFD, guardianOrdersFD
		WaitDelay:  time.Second,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: guardianDeathSignal,
		},
	}
	started := make(chan error, 1)
	go func() {
		defer reports.Close()
		defer t.close()
		// Never unlocked: the thread ends with the goroutine, after the
		// guardian.
		runtime.LockOSThread()
		err := startRecorded(func() (int, error) {
			if err := g.Start(); err != nil {
				return 0, err
			}
			return g.Process.Pid, nil
		})
		// The guardian has its own copies.
		_ = reportsW.Close()
		_ = ordersR.Close()
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
		var ws syscall.WaitStatus
		exited := false
		for err == nil && !exited {
			var line string
			if line, err = r.ReadString('\n'); err != nil {
				break // the guardian has exited
			}
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "event "); ok {
				ev, _ := strconv.Atoi(n)
				c.noteEvent(cmd.Log, event(ev), cmd.KillGrace)
			}
			ws, exited = parseExited(line)
		}
		_ = g.Wait()
		forget(g.Process.Pid)
		c.state = g.ProcessState
		if exited {
			c.status, c.groupKilled = waitStatusExit(ws), true
		} else {
			// The guardian died before CMD did: the kernel killed CMD,
			// and KillLeftovers kills what is left of its group.
			c.status = exitStatus(g.ProcessState)
		}
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// guardianOrders is the lock's end of the orders pipe.
type guardianOrders struct {
	mu     sync.Mutex
	w      *os.File
	closed bool
	grace  time.Duration
	c      *Child
	log    *slog.Logger // nil for none
}

// send writes o to the guardian. A guardian that takes no orders within
// orderTimeout (stopped itself) is bypassed: a stop or a signal goes to
// CMD's group from the lock; a claim is dropped, and the guardian keeps
// the earlier end it heard of. A guardian that is gone needs no order:
// CMD has exited, or the kernel killed it with the guardian, and
// KillLeftovers kills what is left of its group.
func (t *guardianOrders) send(o order) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	line := orderLine(o)
	if o.kind == claimOrder {
		// The monotonic reading first, then the duration from a later
		// instant: the guardian's end is never later than validUntil.
		at := monotonicNow()
		line = claimLine(time.Until(o.until), at)
	}
	_ = t.w.SetWriteDeadline(time.Now().Add(orderTimeout))
	_, err := io.WriteString(t.w, line)
	if err == nil || o.kind == claimOrder || errors.Is(err, syscall.EPIPE) {
		return
	}
	if t.log != nil {
		t.log.Warn("the command's guardian takes no orders; the lock signals the command itself", "err", err)
	}
	switch o.kind {
	case stopOrder:
		t.c.signalUnlessReaped(syscall.SIGTERM)
		t.c.signalUnlessReaped(syscall.SIGCONT)
		time.AfterFunc(t.grace, func() { t.c.signalUnlessReaped(syscall.SIGKILL) })
	case signalOrder:
		t.c.signalUnlessReaped(o.sig)
	}
}

// close closes the lock's end once the guardian has exited.
func (t *guardianOrders) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	_ = t.w.Close()
}

// monotonicNow reads CLOCK_MONOTONIC in nanoseconds.
func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// parseStarted reads the guardian's first report: CMD's pid, or why it
// could not start (a *CommandError, or ErrClaimEnded).
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
	if line == "lapsed" {
		return 0, ErrClaimEnded
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

// RunGuardian is the guardian: args are the lock's pid, the kill grace,
// "--", CMD's path and CMD's arguments (argv[0] first). It returns its
// exit status: CMD's; 2 if it was not started by a lock (no report and
// orders pipes); 1 if the lock died, or the claim ended before CMD
// started.
func RunGuardian(args []string) int {
	lockPid, grace, path, argv, ok := guardianArgs(args)
	if !ok || !isPipe(guardianReportsFD) || !isPipe(guardianOrdersFD) {
		fmt.Fprintf(os.Stderr, "sidecar: %v\n", errNotForUse)
		return 2
	}
	// CMD must not hold the pipes.
	syscall.CloseOnExec(guardianReportsFD)
	syscall.CloseOnExec(guardianOrdersFD)
	reports := os.NewFile(guardianReportsFD, "reports")
	orders := bufio.NewReader(os.NewFile(guardianOrdersFD, "orders"))
	// Until here the parent-death signal ends the guardian, before it
	// started anything; from here on it is caught, and a lock that died
	// before is seen by the check that follows.
	guardianPauseAt("before-handler")
	deathSignals := make(chan os.Signal, 1)
	signal.Notify(deathSignals, guardianDeathSignal)
	if os.Getppid() != lockPid {
		return 1
	}
	// The first claim was written before the guardian started: CMD starts
	// only under a claim that has not ended.
	first, err := readOrder(orders)
	if err != nil || first.kind != claimOrder {
		return 1
	}
	if !time.Now().Before(first.until) {
		fmt.Fprintln(reports, "lapsed")
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

	var lockDied atomic.Bool
	next := make(chan order)
	pass := func(o order) bool {
		select {
		case next <- o:
			return true
		case <-c.done:
			return false
		}
	}
	lockGone := func() {
		if lockDied.CompareAndSwap(false, true) {
			pass(order{kind: lockGoneOrder})
		}
	}
	go func() {
		for {
			o, err := readOrder(orders)
			if err != nil {
				// Only the lock holds the other end: it died.
				lockGone()
				return
			}
			if !pass(o) {
				return
			}
		}
	}()
	go func() {
		// The lock died (before or after CMD started): nothing of CMD
		// may run on unsupervised. Another SIGTERM while the lock lives
		// (sent to the guardian alone) changes nothing: the lock decides
		// what CMD gets.
		for {
			if os.Getppid() != lockPid {
				lockGone()
				return
			}
			select {
			case <-deathSignals:
			case <-c.done:
				return
			}
		}
	}()
	e := &enforcer{
		grace:  grace,
		signal: c.signalUnlessReaped,
		report: func(ev event) { fmt.Fprintf(reports, "event %d\n", int(ev)) },
	}
	e.run(first.until, next, c.done)
	if lockDied.Load() {
		return 1
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok {
		fmt.Fprintf(reports, "exited %d\n", uint32(ws))
	}
	return c.status
}

// readOrder reads the lock's next order; an error means the pipe ended.
// A line that is no order is skipped.
func readOrder(r *bufio.Reader) (order, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return order{}, err
		}
		now := time.Now()
		if o, err := parseOrder(line, now, monotonicNow()); err == nil {
			return o, nil
		}
	}
}

// isPipe reports whether fd is open on a pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// guardianArgs parses "<lock pid> <kill grace> -- <path> <argv0>
// [args...]". The lock may be PID 1 (a container's entrypoint): when PID 1
// of a PID namespace dies, the kernel kills every process left in it,
// CMD's group too.
func guardianArgs(args []string) (lockPid int, grace time.Duration, path string, argv []string, ok bool) {
	if len(args) < 5 || args[2] != "--" {
		return 0, 0, "", nil, false
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid < 1 {
		return 0, 0, "", nil, false
	}
	grace, err = time.ParseDuration(args[1])
	if err != nil || grace < 0 {
		return 0, 0, "", nil, false
	}
	return pid, grace, args[3], args[4:], true
}
