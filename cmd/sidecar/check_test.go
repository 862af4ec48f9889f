package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// sidecar check prints the configuration the sidecar would run with,
// resolved (--backend auto, the identity, the derived timings, the Pod),
// one setting a line in the order of the flags, each flag once.
func TestCheckPrintsTheResolvedConfiguration(t *testing.T) {
	env := []string{"POD_NAME=p", "POD_NAMESPACE=ns", "POD_UID=u-1", "POD_TEMPLATE_HASH=", "POD_CONTROLLER_REVISION_HASH=7d9f5c",
		"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443",
		"LEADER_SIDECAR_LEASE_NAME=demo", "LEADER_SIDECAR_APP_HEALTH_URL=http://app:secret@127.0.0.1:8080/healthz"}
	code, stdout, stderr := runArgs(t, []string{"check", "--ops-address=:8081", "--log-format=json"}, env...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	got := map[string]string{}
	var names []string
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("line %q is not name: value", l)
		}
		if _, dup := got[name]; dup {
			t.Fatalf("%s printed twice:\n%s", name, stdout)
		}
		got[name] = value
		names = append(names, name)
	}
	for name, want := range map[string]string{
		"backend":                   "lease",
		"lease-name":                "demo",
		"identity":                  "p_<a new random suffix at each start>",
		"renew-interval":            "5s",
		"max-record-lease-duration": "2m30s",
		"release-hold-off":          "15s (--lease-duration)",
		"await-replacement":         "off",
		"http-address":              "127.0.0.1:4040 (loopback only)",
		"ops-address":               ":8081",
		"namespace":                 "ns (POD_NAMESPACE)",
		"kubeconfig":                "in-cluster",
		"app-health-url":            "http://app:xxxxx@127.0.0.1:8080/healthz",
		"log-format":                "json",
		"log-level":                 "info",
		"pod-deletion-cost":         "true",
		"pod":                       `POD_NAME="p" POD_NAMESPACE="ns" POD_UID="u-1" revision="7d9f5c"`,
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if strings.Contains(stdout, "secret") {
		t.Errorf("check printed the password of --app-health-url:\n%s", stdout)
	}
	// Every flag of the sidecar, in its order (--http-allow-remote is told
	// with --http-address; --version is no setting).
	var flags []string
	newSidecarConfig().set.VisitAll(func(f *pflag.Flag) {
		if f.Name != "version" && f.Name != "http-allow-remote" {
			flags = append(flags, f.Name)
		}
	})
	if want := append(flags, "pod"); strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("settings printed:\n  %v\nwant the sidecar's flags in order:\n  %v", names, want)
	}
}

// check refuses what the sidecar refuses, with the sidecar's own line on
// stderr and exit status 2: it is the sidecar's parsing and checking.
func TestCheckRefusesWithTheSidecarsError(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{nil, []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://10.0.0.7/healthz"}, `--app-health-url: must name a loopback host`},
		{[]string{"--ops-address=:8081"}, []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:8081/healthz"}, `port 8081 is this sidecar's own listener`},
		{[]string{"--backend", "etcd"}, nil, "--backend: must be one of auto, lease, postgres, sqlite"},
		{nil, []string{"LEADER_SIDECAR_LEASE_DURATION=abc"}, `LEADER_SIDECAR_LEASE_DURATION="abc" (--lease-duration)`},
		{[]string{"--lease-duration=10s"}, nil, "--lease-duration"},
		{[]string{"--http-address=0.0.0.0:4040"}, nil, "--http-address: must be a loopback address"},
		{[]string{"--no-such-flag"}, nil, "unknown flag: --no-such-flag"},
		{[]string{"--shards=257"}, nil, "--shards: must be from 0 (one leader) to 256, got 257"},
		{[]string{"--shards=-1"}, nil, "--shards: must be from 0 (one leader) to 256, got -1"},
		{nil, []string{"LEADER_SIDECAR_SHARDS=eight"}, `LEADER_SIDECAR_SHARDS="eight" (--shards)`},
		{[]string{"--shards=8", "--backend=lease", "--shard-group=billing.", "--namespace=ns"}, nil, `--shard-group: "billing." is not a valid name`},
		{[]string{"--shards=8", "--backend=sqlite", "--readiness-mode=label"}, nil, "--shards: --readiness-mode label publishes one leader"},
		{[]string{"--shards=8", "--backend=sqlite", "--app-health-url=http://127.0.0.1:8080/"}, nil, "--shards: --app-health-url gates one election"},
		{[]string{"--shards=8", "--backend=sqlite", "--release-on-shutdown=false"}, nil, "--shards: a replica in shard mode always drains and releases"},
		{[]string{"--shards=8", "--backend=lease", "--namespace=ns", "--shard-group=" + strings.Repeat("g", 220)}, nil, "--shard-group: the group's Lease " + strings.Repeat("g", 220) + "-member-<identity> would not be a valid name"},
		{[]string{"--shard-group=Bad_Name"}, nil, `--shard-group: "Bad_Name" is not a valid name`},
		{[]string{"--shard-rebalance-delay=-1s"}, nil, "--shard-rebalance-delay: must not be negative, got -1s"},
		{[]string{"--shard-drain-timeout=-1s"}, nil, "--shard-drain-timeout: must not be negative, got -1s"},
		{[]string{"--shard-stop-drain-timeout=-1s"}, nil, "--shard-stop-drain-timeout: must not be negative, got -1s"},
		{nil, []string{"LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT=-3s"}, "--shard-stop-drain-timeout: must not be negative, got -3s"},
		{nil, []string{"LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT=soon"}, `LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT="soon" (--shard-stop-drain-timeout)`},
		{[]string{"--shard-max-per-member=-2"}, nil, "--shard-max-per-member: must not be negative, got -2"},
		{[]string{"--shard-member-owner=node"}, nil, `--shard-member-owner: must be pod or none, got "node"`},
	} {
		code, stdout, stderr := runArgs(t, append([]string{"check"}, c.args...), c.env...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "sidecar: ") || !strings.Contains(stderr, c.want) ||
			strings.Count(stderr, "\n") != 1 {
			t.Errorf("check %v %v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.args, c.env, code, stdout, stderr, c.want)
			continue
		}
		sidecarCode, _, sidecarStderr := runArgs(t, c.args, c.env...)
		if sidecarCode != code || sidecarStderr != stderr {
			t.Errorf("%v %v: the sidecar exits %d with %q, check %d with %q", c.args, c.env, sidecarCode, sidecarStderr, code, stderr)
		}
	}
}

// check opens no store, listens on nothing and reaches no API server: the
// SQLite file is not made, a taken port is no error, and the API server of
// the kubeconfig gets no connection.
func TestCheckOpensNothing(t *testing.T) {
	dir := t.TempDir()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	apiServer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer apiServer.Close()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+apiServer.Addr().String()+`"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "sub", "leader-sidecar.db")
	for _, args := range [][]string{
		{"check", "--backend=sqlite", "--sqlite-path", db, "--http-address", taken.Addr().String()},
		{"check", "--backend=lease", "--kubeconfig", kubeconfig, "--namespace=ns", "--readiness-mode=label", "--ops-address", taken.Addr().String()},
	} {
		code, stdout, stderr := runArgs(t, args, "POD_NAME=p")
		if code != 0 || stderr != "" || stdout == "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("check made the SQLite file's directory: %v", err)
	}
	// A connection check made would be queued by now: accept returns it.
	if err := apiServer.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := apiServer.Accept(); err == nil {
		c.Close()
		t.Error("check connected to the API server of the kubeconfig")
	}
}

// check says what the sidecar would warn of, on stderr, and still exits 0.
func TestCheckWarnsAsTheSidecarWould(t *testing.T) {
	code, _, stderr := runArgs(t, []string{"check", "--http-address=0.0.0.0:4040", "--http-allow-remote"},
		"LEADER_SIDECAR_LEASE_DURATON=20s")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"sidecar check: warning: ignoring unknown environment variable LEADER_SIDECAR_LEASE_DURATON",
		"sidecar check: warning: the app API is served beyond loopback"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestCheckHelp(t *testing.T) {
	code, stdout, stderr := runArgs(t, []string{"check", "--help"}, "LEADER_SIDECAR_BACKEND=etcd")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: sidecar check [flags]") || !strings.Contains(stdout, "--app-health-url") {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	if _, stdout, _ := runArgs(t, []string{"--help"}); !strings.Contains(stdout, "sidecar check [flags]") {
		t.Fatalf("sidecar --help does not list check:\n%s", stdout)
	}
}

// sidecar check resolves shard mode's settings: the group defaults to the
// lease name, the stop drain timeout to the drain timeout.
func TestCheckResolvesShardMode(t *testing.T) {
	code, stdout, stderr := runArgs(t, []string{"check", "--backend=sqlite", "--lease-name=billing", "--shards=8", "--shard-drain-timeout=5s"})
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	for _, want := range []string{"\nshards: 8\n", "\nshard-group: billing\n", "\nshard-rebalance-delay: 30s\n",
		"\nshard-drain-timeout: 5s\n", "\nshard-stop-drain-timeout: 5s\n", "\nshard-max-per-member: 0 (the fair share)\n",
		"\nshard-member-owner: pod (no owner on the sqlite backend)\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check printed no %q:\n%s", strings.TrimSpace(want), stdout)
		}
	}
}

// --shard-stop-drain-timeout, given by flag or variable, is its own
// value, 0 too, whatever --shard-drain-timeout says; not given, it is
// --shard-drain-timeout's, from its variable too.
func TestCheckResolvesTheStopDrainTimeout(t *testing.T) {
	shardMode := []string{"check", "--backend=sqlite", "--shards=8"}
	for _, c := range []struct {
		args    []string
		environ []string
		want    string
	}{
		{[]string{"--shard-drain-timeout=5s", "--shard-stop-drain-timeout=0s"}, nil, "0s"},
		{[]string{"--shard-drain-timeout=5s"}, []string{"LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT=0s"}, "0s"},
		{[]string{"--shard-drain-timeout=5s", "--shard-stop-drain-timeout=2s"}, nil, "2s"},
		{nil, []string{"LEADER_SIDECAR_SHARD_DRAIN_TIMEOUT=7s"}, "7s"},
		{nil, nil, "30s"},
	} {
		args := append(slices.Clone(shardMode), c.args...)
		code, stdout, stderr := runArgs(t, args, c.environ...)
		if code != 0 || !strings.Contains(stdout, "\nshard-stop-drain-timeout: "+c.want+"\n") {
			t.Errorf("%v %v: exit %d, stderr %q; want 0 and shard-stop-drain-timeout: %s in:\n%s", args, c.environ, code, stderr, c.want, stdout)
		}
	}
}

// --shard-member-owner pod names the Pod the member Lease will be owned by
// when the Downward API gives its name, namespace and UID, and says why
// there is none otherwise.
func TestCheckResolvesTheMemberLeasesOwner(t *testing.T) {
	pod := []string{"POD_NAME=web-0", "POD_NAMESPACE=shop", "POD_UID=6f0c3a52-0d4e-4c52-9d5e-2b1f3c4d5e6f"}
	for _, c := range []struct {
		name    string
		args    []string
		environ []string
		want    string
	}{
		{"in its Pod", nil, pod, "pod (the Pod shop/web-0, uid 6f0c3a52-0d4e-4c52-9d5e-2b1f3c4d5e6f)"},
		{"without a UID", nil, pod[:2], "pod (no owner: POD_NAME and POD_UID are not both set)"},
		{"in another namespace", []string{"--namespace=jobs"}, pod, `pod (no owner: the Pod's namespace (POD_NAMESPACE "shop") is not the Lease's ("jobs"))`},
		{"none", []string{"--shard-member-owner=none"}, pod, "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"check", "--backend=lease", "--kubeconfig=/dev/null", "--shards=4"}, c.args...)
			code, stdout, stderr := runArgs(t, args, c.environ...)
			if code != 0 || !strings.Contains(stdout, "\nshard-member-owner: "+c.want+"\n") {
				t.Errorf("exit %d, stderr %q; want 0 and shard-member-owner: %s in:\n%s", code, stderr, c.want, stdout)
			}
		})
	}
}

// In shard mode on Leases the election client's rate is sized by the
// shard count (three requests per shard per renew interval, a burst of
// one per shard, never below the single election's 5 and 10) unless it is
// given, and a rate given below two requests per shard per renew interval
// is refused, naming --kube-api-qps: 64 shards at the default 5 a second
// were held by nobody.
func TestCheckSizesTheKubeRateByTheShards(t *testing.T) {
	env := []string{"POD_NAME=p", "POD_NAMESPACE=ns"}
	for _, c := range []struct {
		args       []string
		qps, burst string
	}{
		{[]string{"--shards", "64"}, "38.4", "64"}, // 3 x 64 / 5s
		{[]string{"--shards", "256", "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"}, "768", "256"}, // 3 x 256 / 1s
		{[]string{"--shards", "4"}, "5", "10"}, // the defaults carry 4
		{[]string{"--shards", "64", "--kube-api-qps", "30", "--kube-api-burst", "20"}, "30", "20"},
		{nil, "5", "10"}, // one election
		{[]string{"--shards", "64", "--backend", "sqlite"}, "5", "10"}, // no Kubernetes client to size
	} {
		args := append([]string{"check", "--backend", "lease", "--kubeconfig", "/dev/null"}, c.args...)
		code, stdout, stderr := runArgs(t, args, env...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
			continue
		}
		if !strings.Contains(stdout, "\nkube-api-qps: "+c.qps+"\n") || !strings.Contains(stdout, "\nkube-api-burst: "+c.burst+"\n") {
			t.Errorf("%v: want kube-api-qps %s and kube-api-burst %s, got:\n%s", c.args, c.qps, c.burst, stdout)
		}
	}
	code, _, stderr := runArgs(t, []string{"check", "--backend", "lease", "--kubeconfig", "/dev/null", "--shards", "64", "--kube-api-qps", "5"}, env...)
	if code != 2 || !strings.Contains(stderr, "--kube-api-qps") || !strings.Contains(stderr, "64 shards") || !strings.Contains(stderr, "25.6") {
		t.Errorf("--shards 64 --kube-api-qps 5: exit %d, stderr %q; want 2 naming --kube-api-qps, the shards and the least rate (25.6)", code, stderr)
	}
}
