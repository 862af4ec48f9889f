package main

import (
	"slices"
	"strings"
	"testing"
)

func TestInvalidConfigurationExits2NamingTheFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     []string
		mention string
	}{
		{"unknown backend", []string{"--backend", "etcd"}, nil, "--backend: must be one of auto, lease, postgres, sqlite"},
		{"namespace not a DNS label", []string{"--namespace", "Prod.Apps"}, nil, "--namespace: \"Prod.Apps\" is not a valid namespace name"},
		{"zero QPS", []string{"--kube-api-qps", "0"}, nil, "--kube-api-qps: must be greater than 0"},
		{"QPS not a number", []string{"--kube-api-qps", "fast"}, nil, `"--kube-api-qps"`},
		{"zero burst", []string{"--kube-api-burst", "0"}, nil, "--kube-api-burst: must be at least 1"},
		{"unknown readiness mode", []string{"--readiness-mode", "leader-only"}, nil, "--readiness-mode: must be one of none, probe, pod-condition, label"},
		{"condition type without a domain", []string{"--readiness-condition-type", "Leader"}, nil, "--readiness-condition-type: must be a domain-qualified name"},
		{"bad role label", []string{"--role-label", "role!"}, nil, "--role-label: \"role!\" is not a valid label key"},
		{"bad events bool", []string{"--events=sometimes"}, nil, `"--events"`},
		{"empty lease name", []string{"--lease-name", ""}, nil, "--lease-name"},
		{"lease name not a DNS name", []string{"--lease-name", "Billing_Job"}, nil, "--lease-name"},
		{"identity with a space", []string{"--identity", "my pod"}, nil, "--identity: must not contain spaces"},
		{"identity with a control character", []string{"--identity", "pod\x01"}, nil, "--identity"},
		{"identity too long", []string{"--identity", strings.Repeat("x", 129)}, nil, "--identity: must be at most 128"},
		{"lease not above renew", []string{"--lease-duration", "10s"}, nil, "--lease-duration: must be greater than the renew deadline"},
		{"lease not whole seconds", []string{"--lease-duration", "15500ms"}, nil, "--lease-duration: must be a whole number of seconds"},
		{"lease not a duration", []string{"--lease-duration", "fifteen"}, nil, `"--lease-duration"`},
		{"renew not above 1.2 x retry", []string{"--renew-deadline", "2s"}, nil, "--renew-deadline: must be greater than 1.2 x retry period"},
		{"zero retry", []string{"--retry-period", "0s"}, nil, "--retry-period: must be greater than 0"},
		{"negative retry", []string{"--retry-period", "-1s"}, nil, "--retry-period: must be greater than 0"},
		{"zero renew interval", []string{"--renew-interval", "0s"}, nil, "--renew-interval: must be greater than 0, got 0s"},
		{"renew interval without room for a retry", []string{"--renew-interval", "8s"}, nil,
			"--renew-interval: must be less than the renew deadline (10s) minus 1.2 x retry period (2.4s), 7.6s, so a failed renewal is retried before the leader stops claiming; got 8s"},
		{"env: renew interval beyond the lease", nil, []string{"LEADER_SIDECAR_RENEW_INTERVAL=20s"}, "--renew-interval: must be less than the renew deadline"},
		{"renew interval checked against given timings", []string{"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms", "--renew-interval", "1400ms"}, nil,
			"--renew-interval: must be less than the renew deadline (2s) minus 1.2 x retry period (600ms), 1.4s"},
		{"record lease bound below the lease", []string{"--max-record-lease-duration", "14s"}, nil,
			"--max-record-lease-duration: must be at least the lease duration (15s), got 14s"},
		{"env: record lease bound below a given lease", []string{"--lease-duration", "30s", "--renew-deadline", "20s"}, []string{"LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION=20s"},
			"--max-record-lease-duration: must be at least the lease duration (30s), got 20s"},
		{"negative hold-off", []string{"--release-hold-off", "-1s"}, nil, "--release-hold-off: must not be negative"},
		{"negative await", []string{"--await-replacement", "-1s"}, nil, "--await-replacement: must be 0 (off) or a positive whole number of milliseconds, got -1s"},
		{"await below a millisecond", []string{"--await-replacement", "1500us"}, nil, "--await-replacement: must be 0 (off) or a positive whole number of milliseconds, got 1.5ms"},
		{"await beyond the record lease bound", []string{"--await-replacement", "151s"}, nil,
			"--await-replacement: 2m31s is beyond --max-record-lease-duration 2m30s, the longest a standby leaves a lease to a replacement"},
		{"await without a release", []string{"--await-replacement", "20s", "--release-on-shutdown=false"}, nil, "--await-replacement: needs --release-on-shutdown"},
		{"env: await in shard mode", []string{"--shards", "4"}, []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=20s"}, "--await-replacement: not in shard mode (--shards 4)"},
		{"address without port", []string{"--http-address", "localhost"}, nil, "--http-address: must be host:port"},
		{"port out of range", []string{"--http-address", "127.0.0.1:65536"}, nil, "--http-address: port must be a number"},
		{"app API on every interface", []string{"--http-address", ":4040"}, nil, "--http-address: must be a loopback address"},
		{"app API on a short IPv4 form", []string{"--http-address", "127.1:4040"}, nil, `--http-address: "127.1" is the short form of 127.0.0.1, which the sidecar does not resolve: write 127.0.0.1`},
		{"ops API on a short IPv4 form", []string{"--ops-address", "10.1:8081"}, nil, `--ops-address: "10.1" is the short form of 10.0.0.1, which the sidecar does not resolve: write 10.0.0.1`},
		{"app API on the pod IP", []string{"--http-address", "10.0.0.7:4040"}, nil, "--http-address: must be a loopback address"},
		{"env: app API on every interface", nil, []string{"LEADER_SIDECAR_HTTP_ADDRESS=0.0.0.0:4040"}, "--http-address: must be a loopback address"},
		{"env: remote allowed by env, refused by flag", []string{"--http-allow-remote=false"}, []string{"LEADER_SIDECAR_HTTP_ADDRESS=[::]:4040", "LEADER_SIDECAR_HTTP_ALLOW_REMOTE=true"}, "--http-address: must be a loopback address"},
		{"ops port not a number", []string{"--ops-address", ":http"}, nil, "--ops-address: port must be a number"},
		{"ops address equals app address", []string{"--ops-address", "127.0.0.1:4040"}, nil, "--ops-address: must differ from --http-address"},
		{"ops on every interface at the app API's port", []string{"--ops-address", ":4040"}, nil, `--ops-address: ":4040" and --http-address "127.0.0.1:4040" would both listen on 127.0.0.1:4040`},
		{"ops on localhost at the app API's port", []string{"--ops-address", "localhost:4040"}, nil, "--ops-address: \"localhost:4040\" and --http-address"},
		{"env: ops on [::] at the app API's port", nil, []string{"LEADER_SIDECAR_OPS_ADDRESS=[::]:4040"}, "--ops-address: \"[::]:4040\" and --http-address"},
		{"empty sqlite path", []string{"--sqlite-path", ""}, nil, "--sqlite-path: must not be empty"},
		{"zero busy timeout", []string{"--sqlite-busy-timeout", "0s"}, nil, "--sqlite-busy-timeout: must be at least 1ms"},
		{"bad bool", []string{"--release-on-shutdown=maybe"}, nil, `"--release-on-shutdown"`},
		{"unknown log format", []string{"--log-format", "xml"}, nil, "--log-format: must be one of text, json"},
		{"unknown log level", []string{"--log-level", "loud"}, nil, "--log-level: must be one of debug, info, warn, error"},
		{"unknown flag", []string{"--lease-durration", "15s"}, nil, "unknown flag: --lease-durration"},
		{"positional argument", []string{"sqlite"}, nil, `unexpected argument "sqlite"`},
		{"env: not a duration", nil, []string{"LEADER_SIDECAR_RETRY_PERIOD=2"}, "LEADER_SIDECAR_RETRY_PERIOD=\"2\" (--retry-period)"},
		{"env: bad value caught by validation", nil, []string{"LEADER_SIDECAR_BACKEND=zookeeper"}, "--backend: must be one of"},
		{"env: bad bool", nil, []string{"LEADER_SIDECAR_SQLITE_ALLOW_NETWORK_FS=yes please"}, "(--sqlite-allow-network-fs)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, c.args, c.env...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, c.mention) {
				t.Fatalf("stderr %q does not mention %q", stderr, c.mention)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
				t.Fatalf("want one line on stderr and nothing on stdout, got %q and %q", stderr, stdout)
			}
		})
	}
}

// --version and --help answer before any validation: a misconfigured Pod
// is exactly where someone runs kubectl exec ... /sidecar --version.
func TestVersionAnswersBeforeValidation(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
	}{
		{"no configuration", []string{"--version"}, nil},
		{"env: unknown backend", []string{"--version"}, []string{"LEADER_SIDECAR_BACKEND=etcd"}},
		{"env: duration that does not parse", []string{"--version"}, []string{"LEADER_SIDECAR_LEASE_DURATION=abc"}},
		{"env: timings that break the rule", []string{"--version"}, []string{"LEADER_SIDECAR_LEASE_DURATION=5s"}},
		{"flag: unknown backend before", []string{"--backend", "etcd", "--version"}, nil},
		{"flag: unknown backend after", []string{"--version", "--backend=etcd"}, nil},
		{"flag: remote app API", []string{"--http-address", "0.0.0.0:4040", "--version"}, nil},
		{"env: version asked by env", nil, []string{"LEADER_SIDECAR_VERSION=true", "LEADER_SIDECAR_BACKEND=etcd"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, c.args, c.env...)
			if code != 0 || !strings.HasPrefix(stdout, "sidecar ") || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the version", code, stdout, stderr)
			}
		})
	}
}

func TestHelpAnswersBeforeValidation(t *testing.T) {
	for _, env := range [][]string{
		{"LEADER_SIDECAR_BACKEND=etcd"},
		{"LEADER_SIDECAR_LEASE_DURATION=abc"},
	} {
		code, stdout, stderr := runArgs(t, []string{"--help"}, env...)
		if code != 0 || !strings.Contains(stdout, "--lease-duration") || stderr != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", env, code, stdout, stderr)
		}
	}
}

var (
	loopbackAddresses = []string{"127.0.0.1:4040", "127.0.0.1:0", "127.1.2.3:4040", "[::1]:4040", "localhost:4040", "LOCALHOST:4040", "[::ffff:127.0.0.1]:4040"}
	remoteAddresses   = []string{":4040", "0.0.0.0:4040", "[::]:4040", "10.0.0.7:4040", "[fd00::7]:4040", "my-pod:4040", "localhost.example.com:4040", "128.0.0.1:4040"}
)

// TestHTTPAddressMustBeLoopbackUnlessAllowed checks every address with the
// allow flag off, on by flag, on by environment, and on by environment but
// off by flag (the flag wins).
func TestHTTPAddressMustBeLoopbackUnlessAllowed(t *testing.T) {
	allows := []struct {
		name    string
		args    []string
		env     []string
		allowed bool
	}{
		{"not allowed", nil, nil, false},
		{"allowed by flag", []string{"--http-allow-remote"}, nil, true},
		{"allowed by environment", nil, []string{"LEADER_SIDECAR_HTTP_ALLOW_REMOTE=true"}, true},
		{"environment overruled by flag", []string{"--http-allow-remote=false"}, []string{"LEADER_SIDECAR_HTTP_ALLOW_REMOTE=true"}, false},
	}
	for _, allow := range allows {
		for _, addr := range append(loopbackAddresses, remoteAddresses...) {
			remote := slices.Contains(remoteAddresses, addr)
			t.Run(allow.name+"/"+addr, func(t *testing.T) {
				cfg, err := parseSidecarConfig(append([]string{"--http-address", addr}, allow.args...), allow.env)
				if wantErr := remote && !allow.allowed; wantErr != (err != nil) {
					t.Fatalf("validate: %v, want an error: %v", err, wantErr)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "--http-address: must be a loopback address") {
					t.Fatalf("error %q does not name the flag and the rule", err)
				}
				if got, want := cfg.exposeAppAPI(), remote && allow.allowed; err == nil && got != want {
					t.Fatalf("exposeAppAPI = %v, want %v", got, want)
				}
			})
		}
	}
}

// TestAllowRemoteWarnsWhatIsExposed starts the sidecar and looks for the
// start-up warning, which must say what is exposed. The run's context is
// already cancelled, so it gets past validation and stops when it opens the
// store, before it listens anywhere.
func TestAllowRemoteWarnsWhatIsExposed(t *testing.T) {
	cases := []struct {
		name string
		args []string
		warn bool
	}{
		{"remote and allowed", []string{"--http-address", "0.0.0.0:0", "--http-allow-remote"}, true},
		{"loopback and allowed", []string{"--http-address", "127.0.0.1:0", "--http-allow-remote"}, false},
		{"loopback", []string{"--http-address", "127.0.0.1:0"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(c.args, "--sqlite-path", t.TempDir()+"/x.db")
			code, _, stderr := runArgs(t, args)
			if code == 2 {
				t.Fatalf("refused as invalid: %q", stderr)
			}
			warned := strings.Contains(stderr, "level=WARN") && strings.Contains(stderr, "--http-allow-remote")
			if warned != c.warn {
				t.Fatalf("warned %v, want %v; stderr:\n%s", warned, c.warn, stderr)
			}
			if warned {
				for _, what := range []string{"/leader", "token", "POST /leader/release", "unauthenticated"} {
					if !strings.Contains(stderr, what) {
						t.Fatalf("the warning does not mention %q:\n%s", what, stderr)
					}
				}
			}
		})
	}
}

func TestHelpExplainsTheRiskOfAllowRemote(t *testing.T) {
	code, stdout, _ := runArgs(t, []string{"--help"})
	i := strings.Index(stdout, "--http-allow-remote")
	if code != 0 || i < 0 {
		t.Fatalf("--help: exit %d, no --http-allow-remote in %q", code, stdout)
	}
	help, _, found := strings.Cut(stdout[i:], "[env LEADER_SIDECAR_HTTP_ALLOW_REMOTE]")
	if !found {
		t.Fatalf("no LEADER_SIDECAR_HTTP_ALLOW_REMOTE after --http-allow-remote in %q", stdout)
	}
	for _, what := range []string{"token", "POST /leader/release", "unauthenticated"} {
		if !strings.Contains(help, what) {
			t.Fatalf("help of --http-allow-remote does not mention %q: %q", what, help)
		}
	}
}
