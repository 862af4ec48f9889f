//go:build linux

package pgtest

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// host is where the servers run: the directory of the binaries and, as
// root, the postgres user that initdb, postgres and pg_basebackup run as,
// since PostgreSQL refuses root.
type host struct {
	bin  string
	cred *syscall.Credential // nil unless running as root
}

// newHost finds the binaries, initdb, postgres and those named in more.
func newHost(more ...string) (*host, error) {
	bin, err := findPostgres(more...)
	if err != nil {
		return nil, err
	}
	h := &host{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and no postgres user to run the server as (%v); %s", err, InstallHint)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		h.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return h, nil
}

// tempDir makes a directory for one server (its socket, data and log),
// owned by the user the server runs as.
func (h *host) tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", err
	}
	if h.cred != nil {
		if err := os.Chown(dir, int(h.cred.Uid), int(h.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// command is one of the server's binaries, run as the server's user and
// killed if the thread that started it ends.
func (h *host) command(name string, args ...string) *exec.Cmd {
	return h.commandAt(filepath.Join(h.bin, name), args...)
}

// commandAt is command for the binary at path (PgBouncer's, say).
func (h *host) commandAt(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: h.cred}
	return cmd
}

// initdb makes a new cluster in dir/data.
func (h *host) initdb(dir string) error {
	out, err := h.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

// settings are the server settings of every test server: no TCP port, and
// speed over durability against a crash of the machine (a crash of the
// server loses nothing the kernel has).
var settings = []string{
	"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
	"-c", "full_page_writes=off", "-c", "max_connections=100",
}

// start starts one server: initdb, then postgres.
func start() (*Server, error) {
	h, err := newHost()
	if err != nil {
		return nil, err
	}
	dir, err := h.tempDir()
	if err != nil {
		return nil, err
	}
	if err := h.initdb(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return h.run(dir)
}

// startTied starts cmd, a command of host.command (killed when the thread
// that started it ends), on a goroutine that keeps its thread for the
// child's lifetime, so the child lives until it exits or is stopped. It
// returns the process and a channel of its exit, after which done runs.
func startTied(cmd *exec.Cmd, done func()) (*os.Process, <-chan error, error) {
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			done()
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		done()
		exited <- err
	}()
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return cmd.Process, exited, nil
}

// run runs postgres on dir/data, its socket in dir, with settings and
// extra, and waits until it accepts connections.
func (h *host) run(dir string, extra ...string) (*Server, error) {
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restart appends
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := append([]string{"-D", filepath.Join(dir, "data"), "-k", dir, "-p", "5432"}, settings...)
	server := h.command("postgres", append(args, extra...)...)
	server.Stdout, server.Stderr = logFile, logFile
	proc, exited, err := startTied(server, func() { logFile.Close() })
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	var once sync.Once
	var stopErr error
	// halt sends sig and waits for the server to exit, once.
	halt := func(sig syscall.Signal) error {
		once.Do(func() {
			_ = proc.Signal(sig)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = proc.Kill()
				<-exited
				stopErr = errors.New("postgres did not stop within 15s; killed")
			}
		})
		return stopErr
	}
	stop := func() error {
		defer os.RemoveAll(dir)
		return halt(syscall.SIGINT) // fast shutdown
	}
	dsn := fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	if err := waitReady(dsn, exited); err != nil {
		log, _ := os.ReadFile(logPath)
		_ = stop()
		return nil, fmt.Errorf("%w\npostgres log:\n%s", err, log)
	}
	return &Server{DSN: dsn, SocketDir: dir, LogPath: logPath, stop: stop,
		crash:  func() error { return halt(syscall.SIGQUIT) }, // an immediate shutdown
		halt:   func() error { return halt(syscall.SIGINT) },  // a fast shutdown, the directory kept
		resume: func() (*Server, error) { return h.run(dir, extra...) }}, nil
}

// startPair starts a primary, then a standby made from it with
// pg_basebackup -R that streams its WAL, and waits until it streams.
func startPair(mode Replication) (*Pair, error) {
	h, err := newHost("pg_basebackup")
	if err != nil {
		return nil, err
	}
	pdir, err := h.tempDir()
	if err != nil {
		return nil, err
	}
	if err := h.initdb(pdir); err != nil {
		os.RemoveAll(pdir)
		return nil, err
	}
	var primaryExtra []string
	if mode == Synchronous {
		primaryExtra = []string{"-c", "synchronous_standby_names=" + StandbyName}
	}
	primary, err := h.run(pdir, primaryExtra...)
	if err != nil {
		return nil, err
	}
	sdir, err := h.tempDir()
	if err != nil {
		_ = primary.Stop()
		return nil, err
	}
	backup := h.command("pg_basebackup", "-D", filepath.Join(sdir, "data"), "-R", "-X", "stream",
		"-h", pdir, "-p", "5432", "-U", "postgres", "--no-sync")
	if out, err := backup.CombinedOutput(); err != nil {
		_ = primary.Stop()
		os.RemoveAll(sdir)
		return nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	// The standby names itself to the primary (application_name) with its
	// cluster_name, which synchronous_standby_names lists.
	standby, err := h.run(sdir, "-c", "cluster_name="+StandbyName, "-c", "hot_standby=on")
	if err != nil {
		_ = primary.Stop()
		return nil, err
	}
	p := &Pair{Primary: primary, Standby: standby, Mode: mode}
	if err := p.awaitStreaming(true); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// findPostgres returns the directory of initdb, postgres and the binaries
// named in more: the newest /usr/lib/postgresql/<version>/bin (Debian's
// layout) that has them all, else the one of initdb in $PATH.
func findPostgres(more ...string) (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(version(b), version(a)) })
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	names := append([]string{"initdb", "postgres"}, more...)
	for _, d := range dirs {
		if !slices.ContainsFunc(names, func(name string) bool { return !isFile(filepath.Join(d, name)) }) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (%s) not found in /usr/lib/postgresql/*/bin or $PATH; %s",
		strings.Join(names, ", "), InstallHint)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
