package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
	"github.com/leader-sidecar/leader-sidecar/pkg/podreadiness"
)

var readinessModes = []string{"none", "probe", "pod-condition", "label"}

// sidecarConfig is the sidecar's whole configuration, checked and
// resolved. The sidecar is built from it alone.
type sidecarConfig struct {
	election          electionConfig
	log               logConfig
	releaseHoldOff    time.Duration
	releaseOnShutdown bool
	httpAddress       string
	// exposeAppAPI: the app API is deliberately served beyond loopback;
	// its POST then accepts any Host header, and start-up warns.
	exposeAppAPI bool
	opsAddress   string // "" for none
	events       bool
	readiness    podreadiness.Mode
	// conditionType and roleLabel name what pod-condition and label
	// modes keep on the Pod.
	conditionType string
	roleLabel     string
	// appHealth gates candidacy on the app's health; url "" for none.
	appHealth appHealthConfig
}

// config checks every flag and resolves what depends on the environment.
// Its error names the flag and the rule it broke.
func (f *sidecarFlags) config(environ []string) (sidecarConfig, error) {
	el, err := f.election.config(environ)
	if err != nil {
		return sidecarConfig{}, err
	}
	if err := f.check(); err != nil {
		return sidecarConfig{}, err
	}
	lc, err := f.log.config()
	if err != nil {
		return sidecarConfig{}, err
	}
	ah, err := f.appHealth.config(f.httpAddress, f.opsAddress)
	if err != nil {
		return sidecarConfig{}, err
	}
	return sidecarConfig{
		appHealth:         ah,
		election:          el,
		log:               lc,
		releaseHoldOff:    f.releaseHoldOff,
		releaseOnShutdown: f.releaseOnShutdown,
		httpAddress:       f.httpAddress,
		exposeAppAPI:      f.httpAllowRemote && !loopbackAddress(f.httpAddress),
		opsAddress:        f.opsAddress,
		events:            f.events,
		readiness:         podreadiness.Mode(f.readinessMode),
		conditionType:     f.conditionType,
		roleLabel:         f.roleLabel,
	}, nil
}

func (f *sidecarFlags) check() error {
	if f.releaseHoldOff < 0 {
		return fmt.Errorf("--release-hold-off: must not be negative, got %v", f.releaseHoldOff)
	}
	if err := checkAppAddress("--http-address", f.httpAddress, f.httpAllowRemote); err != nil {
		return err
	}
	if f.opsAddress != "" {
		if err := checkAddress("--ops-address", f.opsAddress); err != nil {
			return err
		}
		if f.opsAddress == f.httpAddress && !strings.HasSuffix(f.opsAddress, ":0") {
			return fmt.Errorf("--ops-address: must differ from --http-address (both %q)", f.opsAddress)
		}
	}
	if !slices.Contains(readinessModes, f.readinessMode) {
		return oneOf("--readiness-mode", f.readinessMode, readinessModes)
	}
	if errs := validation.IsQualifiedName(f.conditionType); len(errs) > 0 || !strings.Contains(f.conditionType, "/") {
		return fmt.Errorf("--readiness-condition-type: must be a domain-qualified name such as example.com/leader, got %q", f.conditionType)
	}
	if errs := validation.IsQualifiedName(f.roleLabel); len(errs) > 0 {
		return fmt.Errorf("--role-label: %q is not a valid label key: %s", f.roleLabel, strings.Join(errs, "; "))
	}
	return nil
}

// checkAppAddress checks the address of an app API: host:port, and
// loopback unless allowRemote.
func checkAppAddress(flag, addr string, allowRemote bool) error {
	if err := checkAddress(flag, addr); err != nil {
		return err
	}
	if !allowRemote && !loopbackAddress(addr) {
		return fmt.Errorf("%s: must be a loopback address (127.0.0.0/8, [::1] or localhost) unless --http-allow-remote is given, got %q", flag, addr)
	}
	return nil
}

// loopbackAddress reports whether a valid host:port listens on loopback
// only. An empty host (":4040") listens on every interface.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && httpapi.IsLoopbackHost(host)
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
