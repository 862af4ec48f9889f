package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
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

	mu      sync.Mutex
	addr    string // sidecar: the app listener
	logs    bytes.Buffer
	ready   chan struct{} // sidecar: serving; client-go: "started" printed
	leading chan struct{} // closed once it reports leadership
	leadAt  time.Time
	holder  string // sidecar: holder as last reported by /leader/watch
	ident   string // sidecar: its own identity
	done    chan struct{}
	once    sync.Once
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
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.logs.String()
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// candSpec says how to start a candidate.
type candSpec struct {
	sys        string
	prof       profile
	backend    string // sidecar: lease or sqlite
	kubeconfig string
	namespace  string
	lease      string
	sqlitePath string
	identity   string
	follow     bool // sidecar: follow /leader/watch to see it lead
	httpAddr   string
}

func (b *bench) startCand(s candSpec) (*cand, error) {
	c := &cand{sys: s.sys, ready: make(chan struct{}), leading: make(chan struct{}), done: make(chan struct{})}
	timings := []string{"--lease-duration", s.prof.Lease.String(), "--renew-deadline", s.prof.Renew.String(), "--retry-period", s.prof.Retry.String()}
	switch s.sys {
	case sysSidecar:
		addr := s.httpAddr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		args := append([]string{"--http-address", addr, "--log-format", "json", "--events=false", "--identity", s.identity}, timings...)
		if s.backend == "sqlite" {
			args = append(args, "--backend", "sqlite", "--sqlite-path", s.sqlitePath, "--lease-name", s.lease)
		} else {
			args = append(args, "--backend", "lease", "--kubeconfig", s.kubeconfig, "--namespace", s.namespace, "--lease-name", s.lease)
		}
		c.cmd = exec.Command(b.sidecarBin, args...)
	case sysClientGo:
		args := append([]string{"--kubeconfig", s.kubeconfig, "--namespace", s.namespace, "--lease-name", s.lease, "--identity", s.identity}, timings...)
		c.cmd = exec.Command(b.clientGoBin, args...)
	}
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	allMu.Lock()
	all = append(all, c)
	allMu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.readStdout(stdout) }()
	go func() { defer wg.Done(); c.readStderr(stderr, s.follow) }()
	go func() {
		wg.Wait()
		_ = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *cand) readStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if c.sys == sysClientGo {
			switch line {
			case "leading":
				c.markLeading()
			case "started":
				close(c.ready)
			}
		}
		c.mu.Lock()
		c.logs.WriteString(line + "\n")
		c.mu.Unlock()
	}
}

func (c *cand) readStderr(r io.Reader, follow bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		c.logs.WriteString(line + "\n")
		c.mu.Unlock()
		if c.sys != sysSidecar || c.addr != "" {
			continue
		}
		var e struct{ Msg, Listener, Address string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "serving" && e.Listener == "app" {
			c.mu.Lock()
			c.addr = e.Address
			c.mu.Unlock()
			close(c.ready)
			if follow {
				go c.watch()
			}
		}
	}
}

// watch follows the sidecar's /leader/watch and notes the moment it first
// reports leader: true.
func (c *cand) watch() {
	resp, err := http.Get("http://" + c.addr + "/leader/watch")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var st fence.LeaderJSON
		if json.Unmarshal([]byte(data), &st) != nil {
			continue
		}
		c.mu.Lock()
		c.holder, c.ident = st.Holder, st.Identity
		c.mu.Unlock()
		if st.Leader {
			c.markLeading()
		}
	}
}

// holderSeen is the holder the sidecar last reported.
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
	if !c.alive() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	if c.proxy != nil {
		c.proxy.close()
	}
}

// rssKiB is VmRSS from /proc/<pid>/status.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return -1
}
