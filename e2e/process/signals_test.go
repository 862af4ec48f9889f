package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

func TestSIGINTReleasesAndExitsZero(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
	old, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	old.Signal(syscall.SIGINT)
	if code := old.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGINT: exit status %d, want 0", code)
	}
	if _, next := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), time.Second); next != token+1 {
		t.Fatalf("token after SIGINT hand-off %d, want %d", next, token+1)
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	s := sidecartest.Start(t, db, "--sqlite-busy-timeout", "1m")
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
	unlock := sidecartest.HoldWriteLock(t, db)
	defer unlock()

	s.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.Logs(), "shutting down") {
		if time.Now().After(deadline) {
			t.Fatal("no shutdown logged after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if !s.Alive() || strings.Contains(s.Logs(), `"msg":"stopped"`) {
		t.Fatal("the sidecar finished its shutdown although its release could not be written")
	}
	s.Signal(syscall.SIGTERM)
	if code := s.WaitExit(time.Second); code != 1 {
		t.Fatalf("second signal: exit status %d, want 1", code)
	}
}

func TestBadStartsExitWithTheirStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name    string
		args    []string
		code    int
		mention string
	}{
		{"invalid flag value", []string{"--retry-period", "0s"}, 2, "--retry-period: must be greater than 0"},
		{"missing directory", []string{"--sqlite-path", filepath.Join(dir, "nope", "x.db")}, 1, "--sqlite-path: sqlite: open"},
		{"not a database", []string{"--sqlite-path", writeFile(t, dir, "notes.txt", "hello")}, 1, "is not an SQLite database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(sidecartest.Binary(t), append([]string{"--http-address", "127.0.0.1:0"}, c.args...)...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(string(out), c.mention) {
				t.Fatalf("exit %d, output %q; want %d mentioning %q", code, out, c.code, c.mention)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// SIGHUP stops the sidecar as SIGTERM does: it releases and exits 0.
func TestSIGHUPReleasesAndExitsZero(t *testing.T) {
	t.Parallel()
	all := sidecartest.StartMany(t, sidecartest.DBPath(t), 2)
	old, token := sidecartest.AwaitLeader(t, all, 10*time.Second)
	old.Signal(syscall.SIGHUP)
	if code := old.WaitExit(10 * time.Second); code != 0 {
		t.Fatalf("SIGHUP: exit status %d, want 0:\n%s", code, old.Logs())
	}
	if _, next := sidecartest.AwaitLeader(t, sidecartest.Without(all, old), time.Second); next != token+1 {
		t.Fatalf("token after the SIGHUP release %d, want %d", next, token+1)
	}
}

// GNU timeout signals the sidecar and then its whole process group: the
// sidecar gets SIGTERM twice at once, which is one signal, not a second
// one that cuts the shutdown short. It releases, and the standby leads at
// once.
func TestSidecarUnderTimeoutReleases(t *testing.T) {
	t.Parallel()
	db := sidecartest.DBPath(t)
	base := append([]string{"--http-address", "127.0.0.1:0", "--log-format", "json", "--sqlite-path", db}, sidecartest.TimingArgs()...)
	timed := sidecartest.Track(t, exec.Command("timeout", append([]string{"-s", "TERM", "3", sidecartest.Binary(t)}, base...)...))
	timed.WaitServing()
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{timed}, 10*time.Second)
	standby := sidecartest.Start(t, db)
	sidecartest.AwaitSettled(t, []*sidecartest.Sidecar{timed, standby}, timed)
	if code := timed.WaitExit(10 * time.Second); code != 124 {
		t.Fatalf("timeout: exit status %d, want 124:\n%s", code, timed.Logs())
	}
	if strings.Contains(timed.Logs(), "second signal") || !strings.Contains(timed.Logs(), `"msg":"stopped"`) {
		t.Fatalf("the sidecar took timeout's signal for two:\n%s", timed.Logs())
	}
	// Without a release the standby would wait for the lease to run
	// out: at least 2s after the exit (lease 3s, renewals every 1s).
	sidecartest.WaitTrue(t, "the standby leads at once", time.Second, func() bool {
		st, err := standby.Leader()
		return err == nil && st.Leader
	})
}
