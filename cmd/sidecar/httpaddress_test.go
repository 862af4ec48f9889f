package main

import (
	"slices"
	"strings"
	"testing"
)

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
				if got, want := cfg.exposeAppAPI, remote && allow.allowed; err == nil && got != want {
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
