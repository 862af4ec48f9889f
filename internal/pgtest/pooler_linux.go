//go:build linux

package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// pgbouncerPaths are where Debian's pgbouncer package puts the binary.
var pgbouncerPaths = []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"}

// PoolerInstallHint says how to get PgBouncer.
const PoolerInstallHint = "install the Debian package: apt-get update && apt-get install -y pgbouncer"

func startPooler(s *Server, poolSize int) (*Pooler, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range pgbouncerPaths {
			if isFile(p) {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no pgbouncer binary; %s", PoolerInstallHint)
	}
	h, err := newHost()
	if err != nil {
		return nil, err
	}
	dir, err := h.tempDir()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "pgbouncer.log")
	// auth_type any: the pooler logs in to the server as the database
	// entry's user, whatever the client says; the server trusts its socket.
	config := fmt.Sprintf(`[databases]
postgres = host=%s port=5432 dbname=postgres user=postgres
[pgbouncer]
listen_addr =
unix_socket_dir = %s
listen_port = 6432
auth_type = any
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
logfile = %s
pidfile = %s
`, s.SocketDir, dir, poolSize, logPath, filepath.Join(dir, "pgbouncer.pid"))
	configPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	proc, exited, err := startTied(h.commandAt(bin, configPath), func() {})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting pgbouncer: %w", err)
	}
	stopped := false
	stop := func() error {
		defer os.RemoveAll(dir)
		if stopped {
			return nil
		}
		stopped = true
		_ = proc.Signal(syscall.SIGINT)
		select {
		case <-exited:
			return nil
		case <-time.After(15 * time.Second):
			_ = proc.Kill()
			<-exited
			return errors.New("pgbouncer did not stop within 15s; killed")
		}
	}
	dsn := fmt.Sprintf("host=%s port=6432 user=postgres dbname=postgres sslmode=disable", dir)
	if err := waitReady(dsn, exited); err != nil {
		log, _ := os.ReadFile(logPath)
		_ = stop()
		return nil, fmt.Errorf("%w\npgbouncer log:\n%s", err, log)
	}
	return &Pooler{DSN: dsn, SocketDir: dir, LogPath: logPath, stop: stop}, nil
}
