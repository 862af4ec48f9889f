package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leader-sidecar/leader-sidecar/pkg/election"
)

// electionConfig is what a candidate is built from, checked and resolved:
// nothing that uses it reads flags or the environment again.
type electionConfig struct {
	// backend is "lease" or "sqlite" (--backend auto resolved).
	backend   string
	leaseName string
	// identity is unique to this process start: prefix_<uuid>.
	identity      string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	renewInterval time.Duration
	sqlite        sqliteConfig
	kube          kubeConfig
	// pod is this process's Pod, from the Downward API variables.
	pod podInfo
}

type sqliteConfig struct {
	path           string
	busyTimeout    time.Duration
	allowNetworkFS bool
	sharedFile     bool
}

type kubeConfig struct {
	source kubeconfigSource
	// namespace is --namespace; "" means $POD_NAMESPACE, else the service
	// account's namespace, resolved when the Lease is opened.
	namespace string
	qps       float32
	burst     int
}

// podInfo is what the Downward API tells a container about its Pod
// (POD_NAME, POD_NAMESPACE, POD_UID); empty outside a Pod.
type podInfo struct {
	name, namespace, uid string
}

func podFromEnv(environ []string) podInfo {
	get := func(k string) string { v, _ := lookup(environ, k); return v }
	return podInfo{name: get("POD_NAME"), namespace: get("POD_NAMESPACE"), uid: get("POD_UID")}
}

var backends = []string{"auto", "lease", "sqlite"}

// timingFlags names the flag behind each election.Config timing field.
var timingFlags = map[string]string{
	"LeaseDuration": "--lease-duration",
	"RenewDeadline": "--renew-deadline",
	"RetryPeriod":   "--retry-period",
	"RenewInterval": "--renew-interval",
}

// config checks the flags and resolves what depends on the environment:
// --backend auto, the identity, the kubeconfig, the Pod. Its error names
// the flag and the rule it broke.
func (f *electionFlags) config(environ []string) (electionConfig, error) {
	if f.set == nil || !f.set.Changed("renew-interval") {
		f.renewInterval = election.DefaultRenewInterval(f.leaseDuration, f.renewDeadline, f.retryPeriod)
	}
	if err := f.check(); err != nil {
		return electionConfig{}, err
	}
	pod := podFromEnv(environ)
	return electionConfig{
		backend:       resolveBackend(f.backend, environ),
		leaseName:     f.leaseName,
		identity:      election.NewIdentity(identityPrefix(f.identity, pod)),
		leaseDuration: f.leaseDuration,
		renewDeadline: f.renewDeadline,
		retryPeriod:   f.retryPeriod,
		renewInterval: f.renewInterval,
		sqlite:        sqliteConfig{path: f.sqlitePath, busyTimeout: f.sqliteBusyTimeout, allowNetworkFS: f.sqliteAllowNetFS, sharedFile: f.sqliteSharedFile},
		kube: kubeConfig{
			source:    resolveKubeconfig(f.kubeconfig, environ),
			namespace: f.namespace,
			qps:       f.kubeAPIQPS,
			burst:     f.kubeAPIBurst,
		},
		pod: pod,
	}, nil
}

func (f *electionFlags) check() error {
	if !slices.Contains(backends, f.backend) {
		return oneOf("--backend", f.backend, backends)
	}
	if errs := validation.IsDNS1123Subdomain(f.leaseName); len(errs) > 0 {
		return fmt.Errorf("--lease-name: %q is not a valid name: %s", f.leaseName, strings.Join(errs, "; "))
	}
	if err := checkIdentity(f.identity); err != nil {
		return err
	}
	err := election.ValidateTimings(f.leaseDuration, f.renewDeadline, f.retryPeriod)
	if err == nil {
		err = election.ValidateRenewInterval(f.renewInterval, f.renewDeadline, f.retryPeriod)
	}
	if err != nil {
		var ce *election.ConfigError
		if errors.As(err, &ce) {
			return fmt.Errorf("%s: %s", timingFlags[ce.Field], ce.Problem)
		}
		return err
	}
	if f.sqlitePath == "" {
		return errors.New("--sqlite-path: must not be empty")
	}
	if f.sqliteBusyTimeout < time.Millisecond {
		return fmt.Errorf("--sqlite-busy-timeout: must be at least 1ms, got %v", f.sqliteBusyTimeout)
	}
	if f.kubeAPIQPS <= 0 {
		return fmt.Errorf("--kube-api-qps: must be greater than 0, got %v", f.kubeAPIQPS)
	}
	if f.kubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-burst: must be at least 1, got %d", f.kubeAPIBurst)
	}
	if f.namespace != "" {
		if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
			return fmt.Errorf("--namespace: %q is not a valid namespace name: %s", f.namespace, strings.Join(errs, "; "))
		}
	}
	return nil
}

// inCluster reports whether the process runs in a Kubernetes Pod, by the
// variables the kubelet sets (client-go's in-cluster check).
func inCluster(environ []string) bool {
	host, _ := lookup(environ, "KUBERNETES_SERVICE_HOST")
	port, _ := lookup(environ, "KUBERNETES_SERVICE_PORT")
	return host != "" && port != ""
}

// resolveBackend turns --backend auto into lease inside a cluster and
// sqlite elsewhere.
func resolveBackend(flag string, environ []string) string {
	switch {
	case flag != "auto":
		return flag
	case inCluster(environ):
		return "lease"
	default:
		return "sqlite"
	}
}

// identityPrefix is --identity, else $POD_NAME, else the hostname.
func identityPrefix(flag string, pod podInfo) string {
	if flag != "" {
		return flag
	}
	if pod.name != "" {
		return pod.name
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "sidecar"
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

func oneOf(flag, got string, allowed []string) error {
	return fmt.Errorf("%s: must be one of %s, got %q", flag, strings.Join(allowed, ", "), got)
}
