package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

var (
	backends   = []string{"auto", "lease", "sqlite"}
	logFormats = []string{"text", "json"}
	readiness  = []string{"none", "probe", "pod-condition", "label"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// timingFlags names the flag behind each election.Config timing field.
var timingFlags = map[string]string{
	"LeaseDuration": "--lease-duration",
	"RenewDeadline": "--renew-deadline",
	"RetryPeriod":   "--retry-period",
	"RenewInterval": "--renew-interval",
}

// validate checks the whole configuration. Its error names the flag and
// the rule it broke.
func validate(o *options) error {
	if !slices.Contains(backends, o.backend) {
		return oneOf("--backend", o.backend, backends)
	}
	if errs := validation.IsDNS1123Subdomain(o.leaseName); len(errs) > 0 {
		return fmt.Errorf("--lease-name: %q is not a valid name: %s", o.leaseName, strings.Join(errs, "; "))
	}
	if err := checkIdentity(o.identity); err != nil {
		return err
	}
	err := election.ValidateTimings(o.leaseDuration, o.renewDeadline, o.retryPeriod)
	if err == nil {
		err = election.ValidateRenewInterval(o.renewInterval, o.renewDeadline, o.retryPeriod)
	}
	if err != nil {
		var ce *election.ConfigError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s: %s", timingFlags[ce.Field], ce.Problem)
		}
		return err
	}
	if o.releaseHoldOff < 0 {
		return fmt.Errorf("--release-hold-off: must not be negative, got %v", o.releaseHoldOff)
	}
	if err := checkAddress("--http-address", o.httpAddress); err != nil {
		return err
	}
	if !o.httpAllowRemote && !loopbackAddress(o.httpAddress) {
		return fmt.Errorf("--http-address: must be a loopback address (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote is given, got %q", o.httpAddress)
	}
	if o.opsAddress != "" {
		if err := checkAddress("--ops-address", o.opsAddress); err != nil {
			return err
		}
		if o.opsAddress == o.httpAddress && !strings.HasSuffix(o.opsAddress, ":0") {
			return fmt.Errorf("--ops-address: must differ from --http-address (both %q)", o.opsAddress)
		}
	}
	if o.sqlitePath == "" {
		return errors.New("--sqlite-path: must not be empty")
	}
	if o.sqliteBusyTimeout < time.Millisecond {
		return fmt.Errorf("--sqlite-busy-timeout: must be at least 1ms, got %v", o.sqliteBusyTimeout)
	}
	if o.kubeAPIQPS <= 0 {
		return fmt.Errorf("--kube-api-qps: must be greater than 0, got %v", o.kubeAPIQPS)
	}
	if o.kubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-burst: must be at least 1, got %d", o.kubeAPIBurst)
	}
	if o.namespace != "" {
		if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace: %q is not a valid namespace name: %s", o.namespace, strings.Join(errs, "; "))
		}
	}
	if !slices.Contains(readiness, o.readinessMode) {
		return oneOf("--readiness-mode", o.readinessMode, readiness)
	}
	if errs := validation.IsQualifiedName(o.conditionType); len(errs) > 0 || !strings.Contains(o.conditionType, "/") {
		return fmt.Errorf("--readiness-condition-type: must be a domain-qualified name such as example.com/leader, got %q", o.conditionType)
	}
	if errs := validation.IsQualifiedName(o.roleLabel); len(errs) > 0 {
		return fmt.Errorf("--role-label: %q is not a valid label key: %s", o.roleLabel, strings.Join(errs, "; "))
	}
	if !slices.Contains(logFormats, o.logFormat) {
		return oneOf("--log-format", o.logFormat, logFormats)
	}
	if !slices.Contains(logLevels, o.logLevel) {
		return oneOf("--log-level", o.logLevel, logLevels)
	}
	return nil
}

func oneOf(flag, got string, allowed []string) error {
	return fmt.Errorf("%s: must be one of %s, got %q", flag, strings.Join(allowed, ", "), got)
}

const maxIdentityPrefix = 128

func checkIdentity(id string) error {
	if len(id) > maxIdentityPrefix {
		return fmt.Errorf("--identity: must be at most %d bytes, got %d", maxIdentityPrefix, len(id))
	}
	for _, r := range id {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("--identity: must not contain spaces or control characters, got %q", id)
		}
	}
	return nil
}

// loopbackAddress reports whether a valid host:port listens on loopback
// only. An empty host (":4040") listens on every interface.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && httpapi.IsLoopbackHost(host)
}

// exposesAppAPI reports whether the app API is deliberately served beyond
// loopback: its POST then accepts any Host header, and start-up warns.
func exposesAppAPI(o *options) bool {
	return o.httpAllowRemote && !loopbackAddress(o.httpAddress)
}

func checkAddress(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: must be host:port, got %q", flag, addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%s: port must be a number from 0 to 65535, got %q", flag, port)
	}
	return nil
}
