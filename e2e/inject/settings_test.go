package inject

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The settings the injector copies into the sidecar's environment (the
// Lease name from an annotation or a label, the timings, the app health
// settings, the switches) are checked at admission as the sidecar checks
// them at its start: a Pod whose sidecar would refuse them is refused,
// with a message that names the annotation or label, instead of admitted
// to crash-loop in Init.

// settingCase is one Pod's settings and what the injector and the sidecar
// make of them.
type settingCase struct {
	name string
	// labels and annotations are set over labelledPod's (an empty value
	// removes one).
	labels, annotations map[string]string
	// refuse is nil for a Pod admitted with the sidecar, else what the
	// refusal says: the annotation or label and its value, then the rule.
	refuse []string
	// sidecar is the variables (NAME=value) the injector would have given
	// the sidecar for a refused Pod, over those of labelledPod's sidecar:
	// the sidecar must refuse them too (exit 2). nil for a rule of the
	// injector alone, stricter than the sidecar: the sidecar accepts them.
	sidecar []string
	// chartOnly marks a rule of the injector alone (sidecar nil): the
	// sidecar would accept what the policy refuses.
	chartOnly []string
}

const (
	leaseLabel  = "app.kubernetes.io/name"
	appURL      = "http://127.0.0.1:8080/healthz"
	notDuration = "not a duration such as 15s or 1m30s"
)

// annotations is a map of leader-sidecar.io/ annotations, named without
// the prefix, in pairs.
func annotations(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m["leader-sidecar.io/"+kv[i]] = kv[i+1]
	}
	return m
}

var settingCases = []settingCase{
	// Admitted, and the sidecar accepts what it is given.
	{name: "defaults"},
	{name: "lease from app.kubernetes.io/name", labels: map[string]string{leaseLabel: "orders-api"}, annotations: annotations("lease", "")},
	{name: "lease from app", labels: map[string]string{"app": "orders"}, annotations: annotations("lease", "")},
	{name: "lease with dots", annotations: annotations("lease", "billing.jobs-1")},
	{name: "longest lease", annotations: annotations("lease", strings.Repeat("a", 253))},
	{name: "long timings", annotations: annotations("lease-duration", "1m", "renew-deadline", "40s", "retry-period", "5s")},
	{name: "compound durations", annotations: annotations("lease-duration", "1h30m", "renew-deadline", "1m30.5s", "retry-period", "250000us")},
	{name: "renew just above 1.2 x retry", annotations: annotations("lease-duration", "3s", "renew-deadline", "2500ms")},
	{name: "renew interval at its edge", annotations: annotations("renew-interval", "7599ms")},
	{name: "default renew interval in 2ns of room", annotations: annotations("lease-duration", "1s", "renew-deadline", "8ns", "retry-period", "5ns")},
	{name: "renew interval in µs", annotations: annotations("renew-interval", "999999µs")},
	{name: "longest lease the sidecar takes", annotations: annotations("lease-duration", "596523h")},
	{name: "record lease bound equal to the lease", annotations: annotations("max-record-lease-duration", "15s")},
	{name: "await replacement", annotations: annotations("await-replacement", "30s")},
	{name: "await replacement at the record lease bound", annotations: annotations("await-replacement", "150s")},
	{name: "await replacement within a given bound", annotations: annotations("await-replacement", "1h", "max-record-lease-duration", "1h")},
	{name: "app health", annotations: annotations("app-health-url", appURL, "app-health-period", "500ms",
		"app-health-failures", "10", "app-health-timeout", "250ms")},
	{name: "app health settings without a URL are not copied", annotations: annotations("app-health-period", "ten",
		"app-health-failures", "0", "app-health-timeout", "0s")},
	{name: "log text debug; events off", annotations: annotations("log-format", "text", "log-level", "debug", "events", "false")},

	// Refused, as the sidecar refuses them.
	{name: "lease from a label with capitals", labels: map[string]string{leaseLabel: "MyApp"}, annotations: annotations("lease", ""),
		refuse:  []string{`the label app.kubernetes.io/name is "MyApp"`, "not a valid Lease name", "lowercase RFC 1123 subdomain"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=MyApp"}},
	{name: "lease from the label app with _", labels: map[string]string{"app": "my_app"}, annotations: annotations("lease", ""),
		refuse:  []string{`the label app is "my_app"`, "not a valid Lease name"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=my_app"}},
	{name: "lease annotation with _", annotations: annotations("lease", "my_app"),
		refuse:  []string{`the annotation leader-sidecar.io/lease is "my_app"`, "not a valid Lease name"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=my_app"}},
	{name: "lease of 254", annotations: annotations("lease", strings.Repeat("a", 254)),
		refuse:  []string{"the annotation leader-sidecar.io/lease is", "must be no more than 253 characters"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=" + strings.Repeat("a", 254)}},
	{name: "duration without a unit", annotations: annotations("lease-duration", "15"),
		refuse:  []string{`the annotation leader-sidecar.io/lease-duration is "15"`, notDuration},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=15"}},
	{name: "duration not a duration", annotations: annotations("renew-deadline", "ten"),
		refuse:  []string{`the annotation leader-sidecar.io/renew-deadline is "ten"`, notDuration},
		sidecar: []string{"LEADER_SIDECAR_RENEW_DEADLINE=ten"}},
	{name: "negative retry", annotations: annotations("retry-period", "-1s"),
		refuse:  []string{`the annotation leader-sidecar.io/retry-period is "-1s"`, notDuration},
		sidecar: []string{"LEADER_SIDECAR_RETRY_PERIOD=-1s"}},
	{name: "retry 0s", annotations: annotations("retry-period", "0s"),
		refuse:  []string{"the annotation leader-sidecar.io/retry-period (0s) must be greater than 0"},
		sidecar: []string{"LEADER_SIDECAR_RETRY_PERIOD=0s"}},
	{name: "renew not above 1.2 x retry", annotations: annotations("lease-duration", "5s", "renew-deadline", "2400ms"),
		refuse: []string{"the annotation leader-sidecar.io/renew-deadline (2400ms) must be greater than 1.2 x " +
			"the retry period (2s, the key retryPeriod of ConfigMap leader-sidecar-injector/leader-sidecar-injector)"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=5s", "LEADER_SIDECAR_RENEW_DEADLINE=2400ms"}},
	{name: "lease not above renew", annotations: annotations("lease-duration", "10s"),
		refuse:  []string{"the annotation leader-sidecar.io/lease-duration (10s) must be greater than the renew deadline (10s"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=10s"}},
	{name: "lease not whole seconds", annotations: annotations("lease-duration", "15500ms"),
		refuse:  []string{"the annotation leader-sidecar.io/lease-duration (15500ms) must be a whole number of seconds"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=15500ms"}},
	{name: "lease above the most a Lease stores", annotations: annotations("lease-duration", "596524h"),
		refuse:  []string{"the annotation leader-sidecar.io/lease-duration (596524h) must be at most 2147483647 seconds"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=596524h"}},
	{name: "await replacement below a millisecond", annotations: annotations("await-replacement", "1500us"),
		refuse:  []string{"the annotation leader-sidecar.io/await-replacement (1500us) must be a whole number of milliseconds"},
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=1500us"}},
	{name: "await replacement beyond the record lease bound", annotations: annotations("await-replacement", "151s"),
		refuse:  []string{"the annotation leader-sidecar.io/await-replacement (151s) is beyond the longest a standby leaves the Lease to a replacement, 10 x the lease duration (15s)"},
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=151s"}},
	{name: "await replacement beyond a given bound", annotations: annotations("await-replacement", "61s", "max-record-lease-duration", "1m"),
		refuse:  []string{"the annotation leader-sidecar.io/await-replacement (61s) is beyond the longest a standby leaves the Lease to a replacement, the max record lease duration (1m"},
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=61s", "LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION=1m"}},
	{name: "await replacement 0s", annotations: annotations("await-replacement", "0s"),
		refuse:    []string{"the annotation leader-sidecar.io/await-replacement (0s) must be greater than 0"},
		chartOnly: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=0s"}},
	{name: "record lease bound below the lease", annotations: annotations("max-record-lease-duration", "14s"),
		refuse:  []string{"the annotation leader-sidecar.io/max-record-lease-duration (14s) must be at least the lease duration (15s"},
		sidecar: []string{"LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION=14s"}},
	{name: "renew interval 0s", annotations: annotations("renew-interval", "0s"),
		refuse:  []string{"the annotation leader-sidecar.io/renew-interval (0s) must be greater than 0"},
		sidecar: []string{"LEADER_SIDECAR_RENEW_INTERVAL=0s"}},
	{name: "renew interval without room for a retry", annotations: annotations("renew-interval", "7600ms"),
		refuse:  []string{"the annotation leader-sidecar.io/renew-interval (7600ms) must be less than the renew deadline (10s"},
		sidecar: []string{"LEADER_SIDECAR_RENEW_INTERVAL=7600ms"}},
	{name: "no room for the default renew interval", annotations: annotations("lease-duration", "1s", "renew-deadline", "7ns", "retry-period", "5ns"),
		refuse:  []string{"the renew deadline (7ns, the annotation leader-sidecar.io/renew-deadline) leaves no room for the default renew interval"},
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=1s", "LEADER_SIDECAR_RENEW_DEADLINE=7ns", "LEADER_SIDECAR_RETRY_PERIOD=5ns"}},
	{name: "app health failures 0", annotations: annotations("app-health-url", appURL, "app-health-failures", "0"),
		refuse:  []string{`the annotation leader-sidecar.io/app-health-failures is "0"`, "a whole number of at least 1"},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_FAILURES=0"}},
	{name: "app health failures not a number", annotations: annotations("app-health-url", appURL, "app-health-failures", "3x"),
		refuse:  []string{`the annotation leader-sidecar.io/app-health-failures is "3x"`, "a whole number of at least 1"},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_FAILURES=3x"}},
	{name: "app health failures in octal that is not", annotations: annotations("app-health-url", appURL, "app-health-failures", "09"),
		refuse:  []string{`the annotation leader-sidecar.io/app-health-failures is "09"`, "a whole number of at least 1"},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_FAILURES=09"}},
	{name: "app health failures beyond an int64", annotations: annotations("app-health-url", appURL, "app-health-failures", "9223372036854775808"),
		refuse:  []string{`the annotation leader-sidecar.io/app-health-failures is "9223372036854775808"`, "a whole number of at least 1"},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_FAILURES=9223372036854775808"}},
	{name: "app health period 0s", annotations: annotations("app-health-url", appURL, "app-health-period", "0s"),
		refuse:  []string{"the annotation leader-sidecar.io/app-health-period (0s) must be greater than 0"},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_PERIOD=0s"}},
	{name: "app health timeout without a unit", annotations: annotations("app-health-url", appURL, "app-health-timeout", "1"),
		refuse:  []string{`the annotation leader-sidecar.io/app-health-timeout is "1"`, notDuration},
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_TIMEOUT=1"}},
	{name: "log level verbose", annotations: annotations("log-level", "verbose"),
		refuse:  []string{"the annotation leader-sidecar.io/log-level is verbose, not one of debug, info, warn, error"},
		sidecar: []string{"LEADER_SIDECAR_LOG_LEVEL=verbose"}},
	{name: "log format xml", annotations: annotations("log-format", "xml"),
		refuse:  []string{"the annotation leader-sidecar.io/log-format is xml, not one of json, text"},
		sidecar: []string{"LEADER_SIDECAR_LOG_FORMAT=xml"}},
	{name: "events yes", annotations: annotations("events", "yes"),
		refuse:  []string{"the annotation leader-sidecar.io/events is yes, not one of true, false"},
		sidecar: []string{"LEADER_SIDECAR_EVENTS=yes"}},
	{name: "pod deletion cost yes", annotations: annotations("pod-deletion-cost", "yes"),
		refuse:  []string{"the annotation leader-sidecar.io/pod-deletion-cost is yes, not one of true, false"},
		sidecar: []string{"LEADER_SIDECAR_POD_DELETION_COST=yes"}},

	// The app health URL: http(s) on loopback, not on the sidecar's own
	// ports (the app API on 4040, ops on 8081).
	urlCase("http://localhost:8080/healthz", ""),
	urlCase("http://LocalHost:8080/healthz", ""),
	urlCase("HTTPS://127.0.0.1/healthz", ""),
	urlCase("http://127.255.255.254:8080/", ""),
	urlCase("http://[::1]:8080/healthz", ""),
	urlCase("http://[0:0:0:0:0:0:0:1]:8080/", ""),
	urlCase("http://[::ffff:127.0.0.1]:8080/", ""),
	urlCase("http://127.0.0.1:08080/healthz", ""),
	urlCase("http://10.0.0.7:8080/healthz", notLoopback),
	urlCase("http://app:8080/healthz", notLoopback),
	urlCase("http://127.1/healthz", notLoopback),
	urlCase("http://127.000.0.1/healthz", notLoopback),
	urlCase("http://localhost./healthz", notLoopback),
	urlCase("http://[::]:8080/", notLoopback),
	urlCase("http://[::ffff:10.0.0.1]:8080/", notLoopback),
	urlCase("127.0.0.1:8080", notLoopback),
	urlCase("ftp://127.0.0.1/healthz", notLoopback),
	urlCase("http:///healthz", notLoopback),
	urlCase("http://127.0.0.1:0/healthz", "not a port number from 1 to 65535"),
	urlCase("http://127.0.0.1:99999/healthz", "not a port number from 1 to 65535"),
	urlCase("http://127.0.0.1:8081/healthz", "is the sidecar's own"),
	urlCase("http://localhost:4040/leader", "is the sidecar's own"),
	urlCase("http://127.0.0.1:08081/healthz", "is the sidecar's own"),

	// Refused by the injector alone: spellings the sidecar's parsing
	// takes (Go's time.ParseDuration, strconv.ParseInt base 0) that the
	// charts' schemas do not, and durations too long to check without an
	// overflow.
	{name: "duration with a sign", annotations: annotations("lease-duration", "+15s"),
		refuse: []string{`the annotation leader-sidecar.io/lease-duration is "+15s"`, notDuration}, chartOnly: []string{"LEADER_SIDECAR_LEASE_DURATION=+15s"}},
	{name: "duration with a number of 7 digits", annotations: annotations("retry-period", "2000000us"),
		refuse: []string{`the annotation leader-sidecar.io/retry-period is "2000000us"`, notDuration}, chartOnly: []string{"LEADER_SIDECAR_RETRY_PERIOD=2000000us"}},
	{name: "duration of 21 characters", annotations: annotations("lease-duration", "1h1m1s0ms0ms0ms0ms0ms"),
		refuse: []string{`the annotation leader-sidecar.io/lease-duration is "1h1m1s0ms0ms0ms0ms0ms"`, notDuration}, chartOnly: []string{"LEADER_SIDECAR_LEASE_DURATION=1h1m1s0ms0ms0ms0ms0ms"}},
	{name: "app health URL on loopback with a zone", annotations: annotations("app-health-url", "http://[::1%25eth0]:8080/"),
		refuse:    []string{`the annotation leader-sidecar.io/app-health-url is "http://[::1%25eth0]:8080/"`, notLoopback},
		chartOnly: []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://[::1%25eth0]:8080/"}},
	{name: "app health URL on loopback as hex IPv4-mapped", annotations: annotations("app-health-url", "http://[::FFFF:7f00:1]:8080/"),
		refuse:    []string{`the annotation leader-sidecar.io/app-health-url is "http://[::FFFF:7f00:1]:8080/"`, notLoopback},
		chartOnly: []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://[::FFFF:7f00:1]:8080/"}},
	{name: "app health failures in hex", annotations: annotations("app-health-url", appURL, "app-health-failures", "0x10"),
		refuse:    []string{`the annotation leader-sidecar.io/app-health-failures is "0x10"`, "a whole number of at least 1"},
		chartOnly: []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + appURL, "LEADER_SIDECAR_APP_HEALTH_FAILURES=0x10"}},
}

const notLoopback = "not an http:// or https:// URL on loopback"

// urlCase is a case of the app health URL url: admitted (refuse "") or
// refused by both the policy and the sidecar, the policy saying refuse.
func urlCase(url, refuse string) settingCase {
	c := settingCase{name: "app health URL " + url, annotations: annotations("app-health-url", url)}
	if refuse != "" {
		c.refuse = []string{`the annotation leader-sidecar.io/app-health-url is "` + url + `"`, refuse}
		c.sidecar = []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + url}
	}
	return c
}

// The injector and the sidecar agree on every case: what the policy
// admits, the sidecar's check accepts (run on the injected container's
// very environment); what it refuses, naming the annotation or label, the
// sidecar refuses too (exit 2), or, for the injector's own stricter rules,
// accepts.
func TestInjectSettingsAgreeWithTheSidecar(t *testing.T) {
	k := injector(t)
	bin := sidecartest.Binary(t)
	ns := preparedNamespace(t, k)
	base := sidecartest.ContainerNamed(mustDryRun(t, k, ns, labelledPod("orders-0")).Spec.InitContainers, sidecarName)
	if base == nil {
		t.Fatal("labelledPod was not injected")
	}
	for _, c := range settingCases {
		t.Run(c.name, func(t *testing.T) {
			pod := labelledPod("orders-0")
			for k, v := range c.labels {
				pod.Labels[k] = v
			}
			maps.Copy(pod.Annotations, c.annotations)
			maps.DeleteFunc(pod.Labels, func(_, v string) bool { return v == "" })
			maps.DeleteFunc(pod.Annotations, func(_, v string) bool { return v == "" })
			got, err := dryRun(t.Context(), k, ns, pod)
			if c.refuse == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				sc := sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName)
				if sc == nil {
					t.Fatalf("not injected: %v", initNames(got))
				}
				if code, stderr := sidecarCheck(t, bin, sc, nil); code != 0 {
					t.Errorf("admitted, and its sidecar would exit %d: %s", code, stderr)
				}
				return
			}
			if err == nil {
				t.Errorf("admitted, the sidecar given %v", envOver(sidecartest.ContainerNamed(got.Spec.InitContainers, sidecarName)))
			} else {
				for _, want := range c.refuse {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refused with %v\nwant it to say %q", err, want)
					}
				}
			}
			switch {
			case c.sidecar != nil:
				if code, stderr := sidecarCheck(t, bin, base, c.sidecar); code != 2 {
					t.Errorf("the sidecar given %v: exit %d (%s), want 2: the policy refuses what the sidecar takes", c.sidecar, code, stderr)
				}
			case c.chartOnly != nil:
				if code, stderr := sidecarCheck(t, bin, base, c.chartOnly); code != 0 {
					t.Errorf("the sidecar given %v: exit %d (%s): a rule of both, not of the injector alone", c.chartOnly, code, stderr)
				}
			default:
				t.Fatal("a refused case says what the sidecar makes of it (sidecar or chartOnly)")
			}
		})
	}
}

// envOver is the LEADER_SIDECAR_ variables of c, for messages.
func envOver(c *corev1.Container) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "LEADER_SIDECAR_") {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	return out
}

// downward is what the kubelet would give the Downward API fields the
// injector uses (a Pod of a Deployment carries only the first revision
// label; both are given, as any value does here).
var downward = map[string]string{"metadata.name": "orders-0", "metadata.namespace": "shop", "metadata.uid": "6f0c3a52-0d4e-4c52-9d5e-2b1f3c4d5e6f",
	"metadata.labels['pod-template-hash']": "7d9f5c8b4", "metadata.labels['controller-revision-hash']": "orders-6b7c9d"}

// sidecarCheck runs bin check with the arguments of container c and its
// environment as the kubelet would give it (with each NAME=value of over
// set), and returns the exit status and stderr.
func sidecarCheck(t *testing.T, bin string, c *corev1.Container, over []string) (int, string) {
	t.Helper()
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			f := e.ValueFrom.FieldRef
			if f == nil || downward[f.FieldPath] == "" {
				t.Fatalf("container %s: cannot resolve %s from %+v", c.Name, e.Name, e.ValueFrom)
			}
			v = downward[f.FieldPath]
		}
		env[e.Name] = v
	}
	for _, kv := range over {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	envList := []string{}
	for name, v := range env {
		envList = append(envList, name+"="+v)
	}
	return sidecartest.SidecarCheck(t, bin, c.Args, envList)
}
