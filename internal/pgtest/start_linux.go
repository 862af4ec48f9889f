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
	"syscall"
	"time"
)

// start runs initdb and postgres. As root, both run as the postgres user,
// since PostgreSQL refuses root.
func start() (*Server, error) {
	bin, err := findPostgres()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and no postgres user to run the server as (%v); %s", err, InstallHint)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data, logPath := filepath.Join(dir, "data"), filepath.Join(dir, "postgres.log")
	started, exited := make(chan error, 1), make(chan error, 1)
	var proc *os.Process
	// The parent-death signal fires when the thread that started the child
	// ends, so the goroutine keeps its thread for the server's lifetime.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
			"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
		initdb.SysProcAttr = attr
		if out, err := initdb.CombinedOutput(); err != nil {
			started <- fmt.Errorf("initdb: %v\n%s", err, out)
			return
		}
		logFile, err := os.Create(logPath)
		if err != nil {
			started <- err
			return
		}
		defer logFile.Close()
		server := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", "5432",
			"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=100")
		server.Stdout, server.Stderr, server.SysProcAttr = logFile, logFile, attr
		if err := server.Start(); err != nil {
			started <- fmt.Errorf("starting postgres: %w", err)
			return
		}
		proc = server.Process
		started <- nil
		exited <- server.Wait()
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		defer os.RemoveAll(dir)
		_ = proc.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
			return nil
		case <-time.After(15 * time.Second):
			_ = proc.Kill()
			<-exited
			return errors.New("postgres did not stop within 15s; killed")
		}
	}
	dsn := fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	if err := waitReady(dsn, exited); err != nil {
		log, _ := os.ReadFile(logPath)
		_ = stop()
		return nil, fmt.Errorf("%w\npostgres log:\n%s", err, log)
	}
	return &Server{DSN: dsn, SocketDir: dir, LogPath: logPath, stop: stop}, nil
}

// findPostgres returns the directory of initdb and postgres: the newest
// /usr/lib/postgresql/<version>/bin (Debian's layout), else from $PATH.
func findPostgres() (string, error) {
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
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or $PATH; " + InstallHint)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
