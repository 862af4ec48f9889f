package sidecartest

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Proc is a started sidecar process whose JSON logs are kept and read for
// the address of its app listener. It is what a Sidecar is made of, for
// programs that have no test to fail (hack/bench): its methods return
// errors or report, and ending the process is the caller's.
type Proc struct {
	cmd     *exec.Cmd
	logs    *LockedBuffer
	ready   chan struct{} // closed once addr is known or the process ended
	addr    string
	done    chan struct{} // closed when the process has exited
	exitErr error
}

// logTail is how long, after the process has exited, its logs are still
// read: a child it left running (a lock's command) may hold its stderr
// open for ever.
const logTail = 2 * time.Second

// StartProc starts cmd, a sidecar that logs JSON to stderr, and follows
// its logs and its exit. Done closes once the process has exited and its
// logs are read to the end, or logTail later.
func StartProc(cmd *exec.Cmd) (*Proc, error) {
	stderr, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = w
	err = cmd.Start()
	_ = w.Close() // the process has its own copy
	if err != nil {
		_ = stderr.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, logs: &LockedBuffer{}, ready: make(chan struct{}), done: make(chan struct{})}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		p.readLogs(stderr)
	}()
	go func() {
		err := cmd.Wait()
		select {
		case <-logsDone:
		case <-time.After(logTail):
		}
		_ = stderr.Close() // ends a read still waiting on a pipe a child holds
		<-logsDone
		p.exitErr = err
		close(p.done)
	}()
	return p, nil
}

// readLogs keeps the process's logs and notes the app listener's address.
func (p *Proc) readLogs(r io.Reader) {
	defer func() {
		select {
		case <-p.ready:
		default:
			close(p.ready)
		}
	}()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = p.logs.Write([]byte(line + "\n"))
		if addr, ok := serving(line, "app"); ok && p.addr == "" {
			p.addr = addr
			close(p.ready)
		}
	}
}

// serving is the address in a log line saying that the listener (app,
// ops) serves.
func serving(line, listener string) (string, bool) {
	var entry struct{ Msg, Listener, Address string }
	if json.Unmarshal([]byte(line), &entry) != nil || entry.Msg != "serving" || entry.Listener != listener {
		return "", false
	}
	return entry.Address, true
}

// Ready is closed once the app listener's address is known, or the
// process has ended without serving (Addr is then "").
func (p *Proc) Ready() <-chan struct{} { return p.ready }

// Addr is the app listener's host:port, known once Ready is closed.
func (p *Proc) Addr() string { return p.addr }

// Cmd is the started command (to signal or kill the process).
func (p *Proc) Cmd() *exec.Cmd { return p.cmd }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Logs is everything the process has logged so far.
func (p *Proc) Logs() string { return p.logs.String() }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitErr is what waiting for the process returned; valid once Done is
// closed.
func (p *Proc) ExitErr() error { return p.exitErr }

// ProcessState is the exited process's state; valid once Done is closed.
func (p *Proc) ProcessState() *os.ProcessState { return p.cmd.ProcessState }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// listener is the address of the listener name if the process has logged
// that it serves it.
func (p *Proc) listener(name string) (string, bool) {
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if addr, ok := serving(line, name); ok {
			return addr, true
		}
	}
	return "", false
}
