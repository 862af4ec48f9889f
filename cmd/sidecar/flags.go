package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// envPrefix prefixes the environment variable of every flag:
// --lease-duration is also LEADER_SIDECAR_LEASE_DURATION.
const envPrefix = "LEADER_SIDECAR_"

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// newFlagSet returns an empty flag set for the command name ("sidecar",
// "sidecar lock") that reports errors instead of printing or exiting.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// documentEnv appends "[env LEADER_SIDECAR_...]" to the usage of every
// flag of fs but --version. Call it once all flags are defined.
func documentEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "version" {
			f.Usage += " [env " + envName(f.Name) + "]"
		}
	})
}

// parseArgs parses args into fs. On --help it writes usage and the flags
// to w and returns pflag.ErrHelp.
func parseArgs(fs *pflag.FlagSet, args []string, usage string, w io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(w, "%s\nFlags:\n%s", usage, fs.FlagUsages())
	}
	return err
}

// applyEnv fills every flag of fs that was not given on the command line
// from its environment variable: flag > env > default. Its error names the
// variable, its value and the flag.
func applyEnv(fs *pflag.FlagSet, environ []string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := envName(f.Name)
		value, ok := lookup(environ, name)
		if !ok {
			return
		}
		if setErr := fs.Set(f.Name, value); setErr != nil {
			err = fmt.Errorf("%s=%q (--%s): %v", name, value, f.Name, setErr)
		}
	})
	return err
}

// givenOnCommandLine is the names of the flags of fs that the command
// line set, read before applyEnv sets the others from the environment.
func givenOnCommandLine(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	return given
}

// blameEnv puts the variable in front of a check's error that names a
// flag the environment set (the command line did not), as the user wrote
// the variable, not the flag: LEADER_SIDECAR_BACKEND="etcd": --backend: ...
func blameEnv(err error, given map[string]bool, environ []string) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "--") {
		return err
	}
	name := strings.TrimPrefix(msg, "--")
	if i := strings.IndexAny(name, ": ,"); i >= 0 {
		name = name[:i]
	}
	if given[name] {
		return err
	}
	value, ok := lookup(environ, envName(name))
	if !ok {
		return err
	}
	switch name { // never a password
	case "postgres-url":
		value = redactPostgresURL(value)
	case "app-health-url":
		if _, perr := url.Parse(value); perr != nil {
			value = "(a URL that does not parse; not shown)"
		} else {
			value = redactURL(value)
		}
	}
	return fmt.Errorf("%s=%q: %w", envName(name), value, err)
}

// unknownEnv warns of every LEADER_SIDECAR_* variable that no command
// reads and that sidecar lock does not set, sorted: a misspelt variable is
// otherwise silently ignored.
func unknownEnv(environ []string) []string {
	known := knownEnvNames()
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] {
			warnings = append(warnings, "ignoring unknown environment variable "+name)
		}
	}
	sort.Strings(warnings)
	return warnings
}

// knownEnvNames is the variable of every flag of every command, and the
// variables sidecar lock gives its command.
func knownEnvNames() map[string]bool {
	known := map[string]bool{envName("version"): true}
	for _, fs := range []*pflag.FlagSet{newSidecarConfig().set, newLockConfig().set} {
		fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	}
	for _, name := range lockEnvNames {
		known[name] = true
	}
	return known
}

func lookup(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// The checks that the commands share. Each error names the flag and the
// rule it broke.

// oneOf is the error of a flag that is not one of its allowed values.
func oneOf[S ~string](flag string, got S, allowed []S) error {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%s: must be one of %s, got %q", flag, strings.Join(names, ", "), got)
}

// checkAddress checks that addr is host:port with a port number, the host
// not a short form of an IPv4 address.
func checkAddress(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: must be host:port, got %q", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s: port must be a number from 0 to 65535, got %q", flag, port)
	}
	return checkFullIPv4(flag, host)
}

// checkFullIPv4 refuses a host that is a short form of an IPv4 address
// ("127.1"), which curl and Python take for 127.0.0.1 but the sidecar's
// resolver (Go's, without cgo) looks up as a name and does not find.
func checkFullIPv4(flag, host string) error {
	if full, ok := httpapi.ShortIPv4(host); ok {
		return fmt.Errorf("%s: %q is the short form of %s, which the sidecar does not resolve: write %s", flag, host, full, full)
	}
	return nil
}

// loopbackAddress reports whether a valid host:port listens on loopback
// only. An empty host (":4040") listens on every interface.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && httpapi.IsLoopbackHost(host)
}

// sameListener reports whether two valid host:port addresses would listen
// on one socket address, which the second bind would refuse at start: the
// same port (not 0, a port of the system's choosing) on the same host,
// where "localhost" is 127.0.0.1 and an empty or unspecified host (":P",
// "0.0.0.0:P", "[::]:P") is every host. at is the address they share.
func sameListener(a, b string) (at string, clash bool) {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || portA != portB || portA == "0" {
		return "", false
	}
	canonical := func(host string) string {
		if host == "localhost" {
			return "127.0.0.1"
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return ""
		}
		return host
	}
	hostA, hostB = canonical(hostA), canonical(hostB)
	switch {
	case hostA == hostB || hostB == "":
		return net.JoinHostPort(hostA, portA), true
	case hostA == "":
		return net.JoinHostPort(hostB, portA), true
	}
	return "", false
}
