//go:build unix

package sqlite

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
)

// nobody is the unprivileged user the read-only test runs its helper as
// when the test itself runs as root, for whom permission bits do not stop
// writes.
const nobody = 65534

// TestReadOnly opens a database this process may not write: the file is
// read-only, or its directory is (so SQLite cannot create -wal and -shm),
// or the file is missing and cannot be created. Open must fail with an
// error naming the file and the cause.
func TestReadOnly(t *testing.T) {
	tests := []struct {
		name     string
		fileMode os.FileMode // 0: no file
		dirMode  os.FileMode
		want     string
	}{
		{"read-only file", 0o444, 0o777, "is read-only"},
		{"unwritable directory", 0o666, 0o555, "is read-only"},
		{"both", 0o444, 0o555, "is read-only"},
		{"cannot create", 0, 0o555, "cannot open database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := worldReadableDir(t)
			dir := filepath.Join(base, "db")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "leader.db")
			// A real database in WAL mode, closed cleanly (no -wal or -shm left).
			b := openT(t, path, "e")
			if _, err := b.Create(ctxT(t), backendtest.SampleRecord("a", 1)); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if tt.fileMode == 0 {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				chmod(t, path, tt.fileMode)
			}
			chmod(t, dir, tt.dirMode)

			msg := openAsOther(t, base, path)
			for _, want := range []string{path, tt.want} {
				if !strings.Contains(msg, want) {
					t.Fatalf("Open as another user: %q, want an error containing %q", msg, want)
				}
			}
		})
	}
}

// openAsOther opens path read-write as a user without write permission and
// returns the error message. Run as root, that is a helper process running
// as nobody; otherwise the permission bits suffice in this process.
func openAsOther(t *testing.T, base, path string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		b, err := Open(ctxT(t), Options{Path: path, Election: "e"})
		if err == nil {
			_ = b.Close()
			t.Fatal("Open of a database this process cannot write succeeded")
		}
		return err.Error()
	}
	// The test binary lives in a directory only root may enter: copy it.
	exe := filepath.Join(base, "helper.test")
	copyFile(t, exe, 0o755)
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	h := startHelper(t, exe, path, "e", attr)
	line := h.next(t)
	msg, ok := strings.CutPrefix(line, "error ")
	if !ok {
		t.Fatalf("helper running as uid %d answered %q, want an Open error", nobody, line)
	}
	return msg
}

// worldReadableDir returns a new directory that other users may enter,
// removed at cleanup (t.TempDir's parents are private to the owner).
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sqlite-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	chmod(t, dir, 0o755)
	return dir
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the running test binary to dst with mode.
func copyFile(t *testing.T, dst string, mode os.FileMode) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	chmod(t, dst, mode)
}
