//go:build linux

package fencesuite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

func init() {
	mariadbServer.start = startMariaDB
	redisServer.start = startRedis
	etcdServer.start = startEtcd
}

// child is a server process of the tests. The kernel kills it if the test
// binary dies before stopping it (a panic or -timeout): the parent-death
// signal fires when the thread that started the child ends, so the
// goroutine that starts it keeps its thread for the child's lifetime.
type child struct {
	name   string
	proc   *os.Process
	exited chan error
}

func startChild(name string, cmd *exec.Cmd) (*child, error) {
	c := &child{name: name, exited: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("starting %s: %w", name, err)
			return
		}
		c.proc = cmd.Process
		started <- nil
		c.exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// stop sends SIGTERM and waits for the child to exit; after 15 s it kills it.
func (c *child) stop() error {
	_ = c.proc.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return nil
	case <-time.After(15 * time.Second):
		_ = c.proc.Kill()
		<-c.exited
		return fmt.Errorf("%s did not stop within 15s; killed", c.name)
	}
}

// waitUp polls ready until it returns nil, the child exits, or 30 s pass.
func (c *child) waitUp(ready func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case exit := <-c.exited:
			return fmt.Errorf("%s exited at start: %v (last try: %v)", c.name, exit, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 30s: %w", c.name, err)
		}
	}
}

// serverBinary finds one of names in dirs, then on $PATH.
func serverBinary(hint string, dirs []string, names ...string) (string, error) {
	for _, name := range names {
		for _, d := range dirs {
			if p := filepath.Join(d, name); isFile(p) {
				return p, nil
			}
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s or $PATH; %s", strings.Join(names, " or "), strings.Join(dirs, ", "), hint)
}

// failedStart is a start function's error with the server's log added,
// after removing the server's directory.
func failedStart(err error, dir, logPath string) error {
	log, _ := os.ReadFile(logPath)
	os.RemoveAll(dir)
	if len(log) > 4000 {
		log = log[len(log)-4000:]
	}
	return fmt.Errorf("%w\nserver log:\n%s", err, log)
}

const mariadbHint = "install the Debian package: apt-get update && apt-get install -y mariadb-server-core (or mariadb-server)"

// startMariaDB runs mariadbd on an empty data directory in a temporary
// directory, reached on a Unix socket there only (no TCP port). Without
// the system tables it runs with --skip-grant-tables: any user may connect,
// which is fine for a server only this process can reach. The returned
// address is a go-sql-driver DSN for the database "fence".
func startMariaDB() (*runningServer, error) {
	bin, err := serverBinary(mariadbHint, []string{"/usr/sbin", "/usr/local/sbin"}, "mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fence-mariadb-")
	if err != nil {
		return nil, err
	}
	data, sock, logPath := filepath.Join(dir, "data"), filepath.Join(dir, "mariadb.sock"), filepath.Join(dir, "mariadb.log")
	if err := os.Mkdir(data, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"--no-defaults", "--datadir=" + data, "--socket=" + sock, "--skip-networking",
		"--skip-grant-tables", "--log-error=" + logPath, "--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--innodb-lock-wait-timeout=20",
		"--max-connections=100", "--character-set-server=utf8mb4"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // mariadbd refuses root unless told
	}
	server, err := startChild("mariadbd", exec.Command(bin, args...))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", sock
	if err := server.waitUp(func() error { return createDatabase(cfg.FormatDSN(), "fence") }); err != nil {
		_ = server.stop()
		return nil, failedStart(err, dir, logPath)
	}
	cfg.DBName = "fence"
	return &runningServer{addr: cfg.FormatDSN(), stop: func() error {
		defer os.RemoveAll(dir)
		return server.stop()
	}}, nil
}

func createDatabase(dsn, name string) error {
	if _, err := os.Stat(dsnSocket(dsn)); err != nil {
		return err // not listening yet: no driver error logged
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+name)
	return err
}

func dsnSocket(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return ""
	}
	return cfg.Addr
}

const redisHint = "install the Debian package: apt-get update && apt-get install -y redis-server"

// startRedis runs redis-server on a Unix socket in a temporary directory
// (port 0: no TCP), without persistence. The address is the socket's path.
func startRedis() (*runningServer, error) {
	bin, err := serverBinary(redisHint, []string{"/usr/bin", "/usr/local/bin"}, "redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fence-redis-")
	if err != nil {
		return nil, err
	}
	sock, logPath := filepath.Join(dir, "redis.sock"), filepath.Join(dir, "redis.log")
	server, err := startChild("redis-server", exec.Command(bin, "--port", "0", "--unixsocket", sock,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logPath, "--daemonize", "no"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := server.waitUp(func() error {
		c, err := dialRedis(sock)
		if err != nil {
			return err
		}
		defer c.close()
		_, err = c.do("PING")
		return err
	}); err != nil {
		_ = server.stop()
		return nil, failedStart(err, dir, logPath)
	}
	return &runningServer{addr: sock, stop: func() error {
		defer os.RemoveAll(dir)
		return server.stop()
	}}, nil
}

const etcdHint = "make test sets KUBEBUILDER_ASSETS to the directory hack/envtest-binaries.sh builds etcd into: " +
	"export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh | tail -1)"

// startEtcd runs the etcd that hack/envtest-binaries.sh builds (found
// through KUBEBUILDER_ASSETS, as the API server tests find it) as a single
// member on loopback ports, without fsync. The address is its client URL.
func startEtcd() (*runningServer, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set; " + etcdHint)
	}
	bin := filepath.Join(assets, "etcd")
	if !isFile(bin) {
		return nil, fmt.Errorf("no etcd in KUBEBUILDER_ASSETS (%s); %s", assets, etcdHint)
	}
	dir, err := os.MkdirTemp("", "fence-etcd-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	clientURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "--name", "fence", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "fence="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	server, err := startChild("etcd", cmd)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	client := &http.Client{Timeout: time.Second}
	if err := server.waitUp(func() error {
		resp, err := client.Get(clientURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /health: %s", resp.Status)
		}
		return nil
	}); err != nil {
		_ = server.stop()
		return nil, failedStart(err, dir, logPath)
	}
	return &runningServer{addr: clientURL, stop: func() error {
		defer os.RemoveAll(dir)
		return server.stop()
	}}, nil
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
