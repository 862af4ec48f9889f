package main

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// Systems under test.
const (
	sysSidecar  = "leader-sidecar"
	sysClientGo = "client-go"
)

// profile is one set of election timings.
type profile struct {
	Name                string
	Lease, Renew, Retry time.Duration
}

var (
	profDefault = profile{"default", 15 * time.Second, 10 * time.Second, 2 * time.Second}
	profShort   = profile{"short", 3 * time.Second, 2 * time.Second, 500 * time.Millisecond}
)

// cand is one candidate process of either system.
type cand struct {
	sys     string
	cmd     *exec.Cmd
	started time.Time
	proxy   *countingProxy
	sidecar *sidecartest.Proc        // sidecar: the process, its logs and its app listener
	logs    sidecartest.LockedBuffer // client-go: its stdout and stderr
	ready   chan struct{}            // sidecar: serving; client-go: "started" printed
	leading chan struct{}            // closed once it reports leadership
	done    <-chan struct{}          // closed once the process has exited

	mu     sync.Mutex
	leadAt time.Time
	holder string // sidecar: holder as last reported by /leader/watch
	ident  string // sidecar: its own identity
	once   sync.Once
}

var (
	allMu sync.Mutex
	all   []*cand
)

// killAll ends every candidate still running (at exit).
func killAll() {
	allMu.Lock()
	defer allMu.Unlock()
	for _, c := range all {
		if c.alive() {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	all = nil
}

func (c *cand) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *cand) markLeading() {
	c.once.Do(func() {
		c.mu.Lock()
		c.leadAt = time.Now()
		c.mu.Unlock()
		close(c.leading)
	})
}

func (c *cand) leadTime() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leadAt
}

// tail is the end of the process's logs, for error messages.
func (c *cand) tail() string {
	s := c.logs.String()
	if c.sidecar != nil {
		s = c.sidecar.Logs()
	}
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// holderSeen is the holder the sidecar last reported on /leader/watch.
func (c *cand) holderSeen() (holder, self string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holder, c.ident
}

func (c *cand) waitReady(within time.Duration) error {
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		return fmt.Errorf("%s %d exited before it was ready:\n%s", c.sys, c.cmd.Process.Pid, c.tail())
	case <-time.After(within):
		return fmt.Errorf("%s %d not ready within %v:\n%s", c.sys, c.cmd.Process.Pid, within, c.tail())
	}
}

func (c *cand) waitLeading(within time.Duration) error {
	select {
	case <-c.leading:
		return nil
	case <-c.done:
		return fmt.Errorf("%s %d exited before leading:\n%s", c.sys, c.cmd.Process.Pid, c.tail())
	case <-time.After(within):
		return fmt.Errorf("%s %d did not lead within %v:\n%s", c.sys, c.cmd.Process.Pid, within, c.tail())
	}
}

func (c *cand) isLeading() bool {
	select {
	case <-c.leading:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits, then kills.
func (c *cand) stop() {
	if c.alive() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(15 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if c.proxy != nil {
		c.proxy.close()
	}
}

// stopAll stops cs in parallel.
func stopAll(cs []*cand) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(c.stop)
		}
	}
	wg.Wait()
}
