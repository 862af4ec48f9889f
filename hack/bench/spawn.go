package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// candSpec says how to start a candidate.
type candSpec struct {
	sys        string
	prof       profile
	backend    string // sidecar: lease, sqlite or postgres
	kubeconfig string
	namespace  string
	lease      string // the Lease's name, or the SQLite or PostgreSQL row's
	sqlitePath string
	pgURL      string
	identity   string
	follow     bool // sidecar: follow /leader/watch to see it lead
	httpAddr   string
	extra      []string // sidecar: further flags (shard mode's)
}

// spawn starts a candidate of sys on the Lease ns/name behind its own
// counting proxy, or on the row name of the SQLite file ns, or on the
// PostgreSQL row pgElection(ns, name); a sidecar gets the flags extra
// besides.
func (b *bench) spawn(sys string, prof profile, backend, ns, name string, follow bool, extra ...string) (*cand, error) {
	spec := candSpec{sys: sys, prof: prof, backend: backend, namespace: ns, lease: name, follow: follow, extra: extra,
		identity: fmt.Sprintf("%s-%d", strings.ReplaceAll(sys, "-", ""), b.seq.Add(1))}
	var p *countingProxy
	switch backend {
	case "sqlite":
		spec.sqlitePath = filepath.Join(b.tmp, ns+".db")
	case "postgres":
		spec.pgURL, spec.lease = b.pg.DSN, pgElection(ns, name)
	default:
		var err error
		if p, err = newProxy(b.kube.Config); err != nil {
			return nil, err
		}
		if spec.kubeconfig, err = p.kubeconfig(b.tmp); err != nil {
			p.close()
			return nil, err
		}
	}
	c, err := b.startCand(spec)
	if err != nil {
		if p != nil {
			p.close()
		}
		return nil, err
	}
	c.proxy = p
	return c, nil
}

// namespace is a fresh namespace (or, without an API server, a fresh
// SQLite file name) named after base.
func (b *bench) namespace(base string) (string, error) {
	if b.kube == nil {
		return b.freshName(base), nil
	}
	return b.kube.Namespace(context.Background(), base)
}

// freshName is a name after base that nothing else in the run has, and
// a valid lease name (lowercase RFC 1123) when base is one: a SQLite
// file's, or a PostgreSQL group's, whose elections share the records
// table and differ by name only.
func (b *bench) freshName(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, b.seq.Add(1), time.Now().UnixNano())
}

// pgElection is the PostgreSQL row of the election name in the group ns.
func pgElection(ns, name string) string { return ns + "-" + name }

func (b *bench) startCand(s candSpec) (*cand, error) {
	c := &cand{sys: s.sys, ready: make(chan struct{}), leading: make(chan struct{})}
	timings := []string{"--lease-duration", s.prof.Lease.String(), "--renew-deadline", s.prof.Renew.String(), "--retry-period", s.prof.Retry.String()}
	switch s.sys {
	case sysSidecar:
		addr := s.httpAddr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		args := append([]string{"--http-address", addr, "--log-format", "json", "--events=false", "--identity", s.identity}, timings...)
		if b.cfg.LogLevel != "" {
			args = append(args, "--log-level", b.cfg.LogLevel)
		}
		switch s.backend {
		case "sqlite":
			args = append(args, "--backend", "sqlite", "--sqlite-path", s.sqlitePath, "--lease-name", s.lease)
		case "postgres":
			args = append(args, "--backend", "postgres", "--postgres-url", s.pgURL, "--lease-name", s.lease)
		default:
			args = append(args, "--backend", "lease", "--kubeconfig", s.kubeconfig, "--namespace", s.namespace, "--lease-name", s.lease)
		}
		args = append(args, s.extra...)
		c.cmd = exec.Command(b.sidecarBin, args...)
	case sysClientGo:
		args := append([]string{"--kubeconfig", s.kubeconfig, "--namespace", s.namespace, "--lease-name", s.lease, "--identity", s.identity}, timings...)
		c.cmd = exec.Command(b.clientGoBin, args...)
	}
	c.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	c.started = time.Now()
	start := c.startClientGo
	if s.sys == sysSidecar {
		start = func() error { return c.startSidecar(s.follow) }
	}
	if err := start(); err != nil {
		return nil, err
	}
	allMu.Lock()
	all = append(all, c)
	allMu.Unlock()
	return c, nil
}

// startSidecar starts the sidecar through the test harness, which follows
// its logs for the app listener; with follow, it then follows
// /leader/watch to see the sidecar lead.
func (c *cand) startSidecar(follow bool) error {
	p, err := sidecartest.StartProc(c.cmd)
	if err != nil {
		return err
	}
	c.sidecar, c.done = p, p.Done()
	go func() {
		if <-p.Ready(); p.Addr() == "" {
			return // it ended before serving
		}
		close(c.ready)
		if follow {
			c.watch()
		}
	}()
	return nil
}

// startClientGo starts the client-go candidate, which prints "started"
// and "leading" on stdout.
func (c *cand) startClientGo() error {
	c.cmd.Stderr = &c.logs
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	c.done = done
	go func() {
		c.readStdout(stdout)
		_ = c.cmd.Wait() // after the pipe is read to its end
		close(done)
	}()
	return nil
}

func (c *cand) readStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch line {
		case "leading":
			c.markLeading()
		case "started":
			close(c.ready)
		}
		_, _ = c.logs.Write([]byte(line + "\n"))
	}
}

// watch follows the sidecar's /leader/watch and notes the moment it first
// reports leader: true.
func (c *cand) watch() {
	_, _ = sidecartest.OpenWatch(context.Background(), http.DefaultClient, "http://"+c.sidecar.Addr(), func(_ int, data string) {
		st, err := sidecartest.ParseState([]byte(data))
		if err != nil {
			return
		}
		c.mu.Lock()
		c.holder, c.ident = st.Holder, st.Identity
		c.mu.Unlock()
		if st.Leader {
			c.markLeading()
		}
	})
}
