package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
)

// The test binary runs as a helper process, instead of the tests, when
// helperEnv is "1". It opens the database helperDBEnv, election
// helperElectionEnv, prints "ready" (or "error <message>" and exits 1), then
// runs one command per line of stdin:
//
//	update <prev-version> <holder>  ->  won <version> | conflict | error <message>
//	create <holder>                 ->  won <version> | exists | error <message>
//	release <prev-version>          ->  won <version> | conflict | error <message>
//
// Reading the command is the start signal: all helpers block on stdin until
// the test writes the same command to each.
const (
	helperEnv         = "LEADER_SIDECAR_SQLITE_RACE_HELPER"
	helperDBEnv       = "LEADER_SIDECAR_SQLITE_HELPER_DB"
	helperElectionEnv = "LEADER_SIDECAR_SQLITE_HELPER_ELECTION"
)

// lineTimeout bounds the wait for one line from a helper: a failure bound
// for a hung helper, not a speed target.
const lineTimeout = time.Minute

func helperMain() int {
	ctx := context.Background()
	b, err := Open(ctx, Options{Path: os.Getenv(helperDBEnv), Election: os.Getenv(helperElectionEnv)})
	if err != nil {
		fmt.Println("error", oneLine(err))
		return 1
	}
	defer func() { _ = b.Close() }()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var v backend.Version
		switch {
		case len(f) == 3 && f[0] == "update":
			v, err = b.Update(ctx, backend.Version(f[1]), record(f[2]))
		case len(f) == 2 && f[0] == "release":
			v, err = b.Update(ctx, backend.Version(f[1]), record(""))
		case len(f) == 2 && f[0] == "create":
			v, err = b.Create(ctx, record(f[1]))
		default:
			err = fmt.Errorf("bad command %q", in.Text())
		}
		switch {
		case err == nil:
			fmt.Println("won", v)
		case errors.Is(err, backend.ErrConflict):
			fmt.Println("conflict")
		case errors.Is(err, backend.ErrAlreadyExists):
			fmt.Println("exists")
		default:
			fmt.Println("error", oneLine(err))
		}
	}
	return 0
}

func record(holder string) backend.Record {
	return backend.Record{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: time.Now(), RenewTime: time.Now(), Transitions: 1}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// helper is one running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startHelper runs exe (normally this test binary) as a helper on the
// election of path, with attr (such as other credentials) when not nil. It
// is stopped at cleanup.
func startHelper(t *testing.T, exe, path, election string, attr *syscall.SysProcAttr) *helper {
	t.Helper()
	h := &helper{lines: make(chan string, 64)}
	h.cmd = exec.Command(exe, "-test.run=^$")
	h.cmd.Env = append(os.Environ(), helperEnv+"=1", helperDBEnv+"="+path, helperElectionEnv+"="+election,
		// Under -race a process sleeps a second at exit unless told not to.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	h.cmd.Stdout = &lineWriter{ch: h.lines}
	var stderr bytes.Buffer
	h.cmd.Stderr = &stderr
	h.cmd.SysProcAttr = attr
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		t.Fatalf("stdin pipe: %v", err)
	}
	h.stdin = stdin
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	t.Cleanup(func() {
		_ = h.stdin.Close() // EOF: the helper closes its Backend and exits
		done := make(chan error, 1)
		go func() { done <- h.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(lineTimeout):
			_ = h.cmd.Process.Kill()
			<-done
			t.Errorf("helper %d did not exit after stdin closed; stderr:\n%s", h.cmd.Process.Pid, stderr.String())
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("helper %d stderr:\n%s", h.cmd.Process.Pid, stderr.String())
		}
	})
	return h
}

// next returns the helper's next line of output.
func (h *helper) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-h.lines:
		return l
	case <-time.After(lineTimeout):
		t.Fatalf("helper %d printed nothing for %v", h.cmd.Process.Pid, lineTimeout)
		return ""
	}
}

// lineWriter sends each complete line written to it on ch. The exec
// package's copying goroutine calls Write, and Wait waits for that
// goroutine, so no reader outlives its helper.
type lineWriter struct {
	buf []byte
	ch  chan<- string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.ch <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}
