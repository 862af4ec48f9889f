package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// lockConfigOf parses and checks args and environ as sidecar lock does.
func lockConfigOf(args, environ []string) (lockConfig, error) {
	c := newLockConfig()
	if err := c.set.Parse(args); err != nil {
		return lockConfig{}, err
	}
	if err := applyEnv(c.set, environ); err != nil {
		return lockConfig{}, err
	}
	if err := c.check(environ); err != nil {
		return lockConfig{}, err
	}
	return *c, nil
}

func TestLockInvalidConfigurationExits2NamingTheFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		mention string
	}{
		{"no command", nil, nil, "no command: want sidecar lock [flags] -- CMD [ARGS...]"},
		{"only the dashes", []string{"--"}, nil, "no command"},
		{"flags but no command", []string{"--lease-name", "jobs", "--"}, nil, "no command"},
		{"negative kill grace", []string{"--kill-grace", "-1s", "--", "true"}, nil, "--kill-grace: must not be negative"},
		// SIGKILL would be due when another candidate may already lead.
		{"kill grace without a margin", []string{"--kill-grace", "5s", "--", "true"}, nil,
			"--kill-grace: must be at most 3.75s (three quarters of --lease-duration minus --renew-deadline)"},
		{"kill grace past the lease", []string{"--kill-grace", "30s", "--", "true"}, nil, "--kill-grace: must be at most 3.75s"},
		{"kill grace past the lease by env", []string{"--", "true"}, []string{"LEADER_SIDECAR_KILL_GRACE=4s"}, "--kill-grace: must be at most 3.75s"},
		{"the bound follows the timings", []string{"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms", "--kill-grace", "751ms", "--", "true"}, nil,
			"--kill-grace: must be at most 750ms"},
		{"kill grace not a duration", []string{"--kill-grace", "soon", "--", "true"}, nil, `"--kill-grace"`},
		{"env: kill grace not a duration", []string{"--", "true"}, []string{"LEADER_SIDECAR_KILL_GRACE=5"}, `LEADER_SIDECAR_KILL_GRACE="5" (--kill-grace)`},
		{"zero timeout", []string{"--timeout", "0s", "--", "true"}, nil, "--timeout: must be greater than 0 (for no wait at all, --nonblock)"},
		{"negative timeout", []string{"--timeout", "-1s", "--", "true"}, nil, "--timeout: must be greater than 0"},
		{"timeout not a duration", []string{"--timeout", "soon", "--", "true"}, nil, `"--timeout"`},
		{"env: nonblock not a bool", []string{"--", "true"}, []string{"LEADER_SIDECAR_NONBLOCK=maybe"}, "LEADER_SIDECAR_NONBLOCK"},
		{"verbose and a log level", []string{"--verbose", "--log-level", "debug", "--", "true"}, nil, "--verbose: is --log-level info; give one of them"},
		{"app API on every interface", []string{"--http-address", ":4040", "--", "true"}, nil, "--http-address: must be a loopback address"},
		{"app API without a port", []string{"--http-address", "localhost", "--", "true"}, nil, "--http-address: must be host:port"},
		{"a flag only the sidecar has", []string{"--readiness-mode", "label", "--", "true"}, nil, "unknown flag: --readiness-mode"},
		{"unknown flag", []string{"--kill-grase", "1s", "--", "true"}, nil, "unknown flag: --kill-grase"},
		// The election flags are the sidecar's, checked by the same code.
		{"unknown backend", []string{"--backend", "etcd", "--", "true"}, nil, "--backend: must be one of auto, lease, postgres, sqlite"},
		{"lease not above renew", []string{"--lease-duration", "10s", "--", "true"}, nil, "--lease-duration: must be greater than the renew deadline"},
		{"zero retry", []string{"--retry-period", "0s", "--", "true"}, nil, "--retry-period: must be greater than 0"},
		{"lease name not a DNS name", []string{"--lease-name", "Billing_Job", "--", "true"}, nil, "--lease-name"},
		{"identity with a space", []string{"--identity", "my job", "--", "true"}, nil, "--identity: must not contain spaces"},
		{"empty sqlite path", []string{"--sqlite-path", "", "--", "true"}, nil, "--sqlite-path: must not be empty"},
		// ./leader-sidecar.db would be another file from another working
		// directory: cron's and a shell's locks would not exclude each other.
		{"no sqlite path", []string{"--", "true"}, nil, "--sqlite-path: required with the sqlite backend"},
		{"no sqlite path, sqlite by env", []string{"--", "true"}, []string{"LEADER_SIDECAR_BACKEND=sqlite"}, "--sqlite-path: required"},
		{"zero QPS", []string{"--kube-api-qps", "0", "--", "true"}, nil, "--kube-api-qps: must be greater than 0"},
		{"namespace not a DNS label", []string{"--namespace", "Prod.Apps", "--", "true"}, nil, "--namespace: \"Prod.Apps\" is not a valid namespace name"},
		{"unknown log format", []string{"--log-format", "xml", "--", "true"}, nil, "--log-format: must be one of text, json"},
		{"env: bad timing", []string{"--", "true"}, []string{"LEADER_SIDECAR_RENEW_DEADLINE=abc"}, `LEADER_SIDECAR_RENEW_DEADLINE="abc" (--renew-deadline)`},
		{"env: bad backend", []string{"--", "true"}, []string{"LEADER_SIDECAR_BACKEND=zookeeper"}, "--backend: must be one of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, append([]string{"lock"}, c.args...), c.env...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.HasPrefix(stderr, "sidecar lock: ") || !strings.Contains(stderr, c.mention) {
				t.Fatalf("stderr %q does not mention %q", stderr, c.mention)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
				t.Fatalf("want one line on stderr and nothing on stdout, got %q and %q", stderr, stdout)
			}
		})
	}
}

// A CMD that cannot be run is refused before the election is joined, with
// a shell's statuses: 127 not found, 126 not executable.
func TestLockCommandThatCannotRun(t *testing.T) {
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "x.db")
	cases := []struct {
		name    string
		command string
		code    int
		mention string
	}{
		{"not in PATH", "no-such-command-here", 127, "executable file not found"},
		{"no such file", filepath.Join(dir, "missing.sh"), 127, "no such file"},
		{"not executable", notExecutable, 126, "permission denied"},
		{"a directory", dir, 126, dir},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runArgs(t, []string{"lock", "--sqlite-path", db, "--", c.command}, "PATH="+os.Getenv("PATH"))
			if code != c.code || !strings.Contains(stderr, c.mention) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, stderr, c.code, c.mention)
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatal("the store was opened for a command that cannot run")
			}
		})
	}
}

func TestLockConfig(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		env       []string
		command   []string
		killGrace time.Duration
		leaseName string
	}{
		// SIGKILL is due halfway between the renew deadline and the
		// lease duration: the other half is the margin before another
		// candidate may lead.
		{"kill grace defaults to half of lease minus renew", []string{"--", "true"}, nil,
			[]string{"true"}, (election.DefaultLeaseDuration - election.DefaultRenewDeadline) / 2, "leader-sidecar"},
		{"the default follows the timings", []string{"--lease-duration", "20s", "--renew-deadline", "12s", "--", "true"}, nil,
			[]string{"true"}, 4 * time.Second, "leader-sidecar"},
		// lease - renew deadline - retry period would be negative here.
		{"the default with a long retry period", []string{"--lease-duration", "20s", "--renew-deadline", "12s", "--retry-period", "9s", "--", "true"}, nil,
			[]string{"true"}, 4 * time.Second, "leader-sidecar"},
		{"kill grace by flag", []string{"--kill-grace", "3s", "--", "true"}, nil, []string{"true"}, 3 * time.Second, "leader-sidecar"},
		{"kill grace at its bound", []string{"--kill-grace", "3750ms", "--", "true"}, nil, []string{"true"}, 3750 * time.Millisecond, "leader-sidecar"},
		{"a longer grace with a longer lease", []string{"--lease-duration", "60s", "--kill-grace", "30s", "--", "true"}, nil, []string{"true"}, 30 * time.Second, "leader-sidecar"},
		{"kill grace by env", []string{"--", "true"}, []string{"LEADER_SIDECAR_KILL_GRACE=1s"}, []string{"true"}, time.Second, "leader-sidecar"},
		{"flag beats env", []string{"--kill-grace", "2s", "--", "true"}, []string{"LEADER_SIDECAR_KILL_GRACE=1s"}, []string{"true"}, 2 * time.Second, "leader-sidecar"},
		{"zero kill grace: SIGKILL at once", []string{"--kill-grace", "0s", "--", "true"}, nil, []string{"true"}, 0, "leader-sidecar"},
		{"CMD's flags are CMD's", []string{"--lease-name", "jobs", "--", "sh", "-c", "exit 3", "--lease-name", "x"}, nil,
			[]string{"sh", "-c", "exit 3", "--lease-name", "x"}, 2500 * time.Millisecond, "jobs"},
		{"without the dashes, the first word that is no flag is CMD", []string{"--lease-name", "jobs", "sh", "--lease-name", "x"}, nil,
			[]string{"sh", "--lease-name", "x"}, 2500 * time.Millisecond, "jobs"},
		{"election flags from env", []string{"--", "true"}, []string{"LEADER_SIDECAR_LEASE_NAME=nightly"}, []string{"true"}, 2500 * time.Millisecond, "nightly"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := lockConfigOf(c.args, append(c.env, "PATH="+os.Getenv("PATH"), "LEADER_SIDECAR_SQLITE_PATH=/var/lib/jobs/election.db"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.command, c.command) || cfg.killGrace != c.killGrace || cfg.election.leaseName != c.leaseName {
				t.Fatalf("command %q, kill grace %v, lease %q; want %q, %v, %q",
					cfg.command, cfg.killGrace, cfg.election.leaseName, c.command, c.killGrace, c.leaseName)
			}
			if !filepath.IsAbs(cfg.path) || filepath.Base(cfg.path) != c.command[0] {
				t.Fatalf("path %q for %q", cfg.path, c.command[0])
			}
			if cfg.httpAddress != "" {
				t.Fatalf("app API on %q by default", cfg.httpAddress)
			}
		})
	}
}

func TestLockHelpShowsItsOwnUsage(t *testing.T) {
	code, stdout, stderr := runArgs(t, []string{"lock", "--help"}, "LEADER_SIDECAR_BACKEND=etcd")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"Usage: sidecar lock [flags] -- CMD [ARGS...]", "--kill-grace", "--lease-duration",
		"LEADER_SIDECAR_TOKEN", "LEADER_SIDECAR_VALID_UNTIL", "[env LEADER_SIDECAR_KILL_GRACE]", "Exit status",
		"--timeout", "--nonblock", "--verbose", "124 if it did not lead within --timeout"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("lock --help does not show %q", want)
		}
	}
	for _, notWanted := range []string{"--readiness-mode", "--ops-address", "--release-on-shutdown", "Commands:"} {
		if strings.Contains(stdout, notWanted) {
			t.Errorf("lock --help shows %q, which is not lock's", notWanted)
		}
	}
}

func TestCommandEnvironment(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	st := election.Status{Leader: true, Identity: "job_1234", Holder: "job_1234", Token: 42, ValidUntil: until}
	inherited := []string{"PATH=/bin", "LEADER_SIDECAR_TOKEN=7", "LEADER_SIDECAR_LEASE_NAME=jobs"}
	env := commandEnv(inherited, st, "jobs")
	want := []string{"PATH=/bin", "LEADER_SIDECAR_LEASE_NAME=jobs", "LEADER_SIDECAR_TOKEN=42", "LEADER_SIDECAR_IDENTITY=job_1234",
		"LEADER_SIDECAR_VALID_UNTIL=2030-01-02T02:04:05.0000006Z", "LEADER_SIDECAR_LEASE=jobs"}
	if !slices.Equal(env, want) {
		t.Fatalf("environment\n%q\nwant\n%q", env, want)
	}
	if got, err := time.Parse(time.RFC3339, strings.TrimPrefix(env[4], "LEADER_SIDECAR_VALID_UNTIL=")); err != nil || !got.Equal(until) {
		t.Fatalf("LEADER_SIDECAR_VALID_UNTIL parses as %v, %v; want %v", got, err, until)
	}
}

func TestLockWaitAndLogFlags(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      []string
		timeout  time.Duration
		nonblock bool
		level    slog.Level
	}{
		{"defaults: wait for ever, warnings and errors only", []string{"--", "true"}, nil, 0, false, slog.LevelWarn},
		{"timeout", []string{"--timeout", "90s", "--", "true"}, nil, 90 * time.Second, false, slog.LevelWarn},
		{"timeout by env", []string{"--", "true"}, []string{"LEADER_SIDECAR_TIMEOUT=1m"}, time.Minute, false, slog.LevelWarn},
		{"nonblock", []string{"--nonblock", "--", "true"}, nil, 0, true, slog.LevelWarn},
		{"nonblock, short", []string{"-n", "--", "true"}, nil, 0, true, slog.LevelWarn},
		{"nonblock by env", []string{"--", "true"}, []string{"LEADER_SIDECAR_NONBLOCK=true"}, 0, true, slog.LevelWarn},
		{"verbose", []string{"--verbose", "--", "true"}, nil, 0, false, slog.LevelInfo},
		{"verbose, short", []string{"-v", "--", "true"}, nil, 0, false, slog.LevelInfo},
		{"log level", []string{"--log-level", "debug", "--", "true"}, nil, 0, false, slog.LevelDebug},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := lockConfigOf(c.args, append(c.env, "PATH="+os.Getenv("PATH"), "LEADER_SIDECAR_SQLITE_PATH=/var/lib/jobs/election.db"))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.timeout != c.timeout || cfg.nonblock != c.nonblock || cfg.log.slogLevel() != c.level {
				t.Fatalf("timeout %v, nonblock %v, level %v; want %v, %v, %v",
					cfg.timeout, cfg.nonblock, cfg.log.slogLevel(), c.timeout, c.nonblock, c.level)
			}
		})
	}
}

func TestLossReason(t *testing.T) {
	running := &electionRun{done: make(chan struct{})}
	stopped := &electionRun{done: make(chan struct{}), err: errors.New("sqlite: " + backend.ErrStoreLost.Error())}
	close(stopped.done)
	leading := election.Status{Leader: true, Identity: "me", Holder: "me", Token: 4}
	cases := []struct {
		name    string
		st      election.Status
		e       *electionRun
		mention string // "" for not lost
	}{
		{"still leading the term", leading, running, ""},
		{"a new term of its own", election.Status{Leader: true, Identity: "me", Holder: "me", Token: 5}, running, "a new term began (token 5)"},
		{"another holder", election.Status{Identity: "me", Holder: "you"}, running, "the record now names you"},
		{"the claim lapsed", election.Status{Identity: "me", Holder: "me"}, running, "the claim lapsed"},
		{"released or removed", election.Status{Identity: "me"}, running, "the record was released or removed"},
		{"the store was lost", leading, stopped, "the election stopped: sqlite: " + backend.ErrStoreLost.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := lossReason(c.st, 4, c.e)
			if (c.mention == "") != (got == "") || !strings.Contains(got, c.mention) {
				t.Fatalf("lossReason = %q, want %q", got, c.mention)
			}
		})
	}
}
