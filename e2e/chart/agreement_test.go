package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// agreementCase is one set of sidecar: values, and what the charts and
// the sidecar make of it.
type agreementCase struct {
	name string
	// values is the sidecar: map in YAML flow style, without its braces.
	values string
	// refuse is "" for values the charts render, else what the library's
	// render error says.
	refuse string
	// schema is what the example chart's values.schema.json says instead,
	// when it refuses the values before the library sees them.
	schema string
	// sidecar, for refused values the sidecar refuses too, is the
	// arguments (--flag=value) and variables (NAME=value) the chart would
	// have given it, over the default rendering's, and says what the
	// sidecar says of them: the rule the chart mirrors. nil for a rule of
	// the chart alone.
	sidecar []string
	says    string
}

const (
	refusedURL      = "sidecar.appHealth.url must be an http:// or https:// URL on loopback"
	sidecarNotHTTP  = "--app-health-url: must be an http:// or https:// URL"
	sidecarNotLocal = "--app-health-url: must name a loopback host"
	sidecarShort    = `--app-health-url: "127.1" is the short form of 127.0.0.1`
	ownListener     = "is this sidecar's own listener"
	badPort         = "is not a port number from 1 to 65535"
)

// url is a case for one app health URL: rendered by the charts, or refused
// by both the charts and the sidecar (saying says).
func urlCase(url, refuse, says string) agreementCase {
	c := agreementCase{name: "appHealth.url " + strings.ReplaceAll(url, ",", ";"), values: fmt.Sprintf("appHealth: {url: %q}", url)}
	if refuse != "" {
		c.refuse, c.sidecar, c.says = refuse, []string{"LEADER_SIDECAR_APP_HEALTH_URL=" + url}, says
	}
	return c
}

// agreementCases is every value the library's _validate.tpl and the
// charts' values.schema.json refuse, and values they accept: every enum
// value of the schema, and the edges of each rule.
var agreementCases = []agreementCase{
	// Accepted: the defaults, every enum value, the edges.
	{name: "defaults"},
	{name: "backend sqlite; log text debug; pull Always", values: "backend: sqlite, logFormat: text, logLevel: debug, image: {pullPolicy: Always}"},
	{name: "sqlite on a claim; log warn; pull Never", values: "backend: sqlite, sqlite: {volume: {type: persistentVolumeClaim, claimName: db}}, logLevel: warn, image: {pullPolicy: Never}"},
	{name: "log error; pull IfNotPresent", values: "logLevel: error, image: {pullPolicy: IfNotPresent}"},
	{name: "readiness probe", values: "readiness: {mode: probe}"},
	{name: "readiness pod-condition", values: "readiness: {mode: pod-condition, conditionType: example.com/Leader_1}"},
	{name: "readiness label", values: "readiness: {mode: label, roleLabel: example.com/role}"},
	{name: "readiness label; label without prefix", values: "readiness: {mode: label, roleLabel: role}"},
	{name: "longest names", values: "leaseName: " + strings.Repeat("a", 253) + ", readiness: {mode: label, roleLabel: " + strings.Repeat("r", 63) + "}"},
	{name: "longest condition type", values: "readiness: {mode: pod-condition, conditionType: " + strings.Repeat("a", 253) + "/" + strings.Repeat("c", 63) + "}"},
	{name: "plain container", values: "native: false"},
	{name: "plain container; release on shutdown", values: "native: false, releaseOnShutdown: true"},
	{name: "native; no release on shutdown", values: "releaseOnShutdown: false"},
	{name: "wait for leadership", values: "waitForLeadership: true"},
	{name: "lease created; no events", values: "lease: {create: true}, events: false"},
	{name: "lease name", values: "leaseName: billing.jobs-1"},
	{name: "image digest", values: `image: {digest: "sha256:` + strings.Repeat("ab", 32) + `"}`},
	{name: "lease just above renew", values: "leaseDuration: 11s"},
	{name: "long timings", values: "leaseDuration: 1m, renewDeadline: 40s, retryPeriod: 5s"},
	{name: "await replacement", values: "awaitReplacement: 30s"},
	{name: "await replacement at the record lease bound", values: "awaitReplacement: 150s"},
	{name: "await replacement within a given record lease bound", values: "awaitReplacement: 1h, maxRecordLeaseDuration: 1h"},
	{name: "await replacement off", values: "awaitReplacement: 0s"},
	{name: "await replacement; plain container releasing", values: "awaitReplacement: 30s, native: false, releaseOnShutdown: true"},
	{name: "renew just above 1.2 x retry", values: "leaseDuration: 3s, renewDeadline: 2500ms"},
	{name: "renew interval at its edge", values: "renewInterval: 7599ms"},
	{name: "record lease bound at the lease", values: "maxRecordLeaseDuration: 15s"},
	{name: "record lease bound of a day", values: "maxRecordLeaseDuration: 24h"},
	{name: "other ports", values: "httpPort: 4041, opsPort: 9090"},
	{name: "ids null", values: "securityContext: {runAsUser: null, runAsGroup: null, fsGroup: null}"},
	{name: "extra args and env", values: `extraArgs: ["--kube-api-qps=20"], extraEnv: [{name: LEADER_SIDECAR_KUBE_API_BURST, value: "30"}]`},
	{name: "app health; all settings", values: "appHealth: {url: http://127.0.0.1:8080/healthz, period: 5s, failures: 2, timeout: 500ms}"},

	{name: "backend postgres from a Secret", values: "backend: postgres, postgres: {existingSecret: db, key: dsn, schema: jobs, table: leaders, signal: poll}"},
	{name: "backend postgres from a url", values: "backend: postgres, postgres: {url: \"postgres://app:pw@db/orders\"}, readiness: {mode: label}"},
	{name: "sharding on postgres", values: "backend: postgres, postgres: {existingSecret: db}, sharding: {enabled: true, shards: 16}"},
	{name: "sharding", values: "sharding: {enabled: true}"},
	{name: "sharding; all settings", values: "sharding: {enabled: true, shards: 256, group: billing.jobs, rebalanceDelay: 0s, drainTimeout: 1m, stopDrainTimeout: 20s, maxPerMember: 3}"},
	{name: "sharding; a stop that waits for the app", values: "sharding: {enabled: true, drainTimeout: 1m, stopDrainTimeout: 1m}"},
	{name: "sharding of one shard on sqlite", values: "backend: sqlite, sharding: {enabled: true, shards: 1}"},
	{name: "sharding in a plain container", values: "native: false, sharding: {enabled: true}"},
	{name: "sharding; release on shutdown", values: "releaseOnShutdown: true, sharding: {enabled: true}"},
	{name: "sharding; longest group on Leases", values: "sharding: {enabled: true, group: " + strings.Repeat("g", 145) + "}"},
	{name: "sharding; longest group on sqlite", values: "backend: sqlite, sharding: {enabled: true, group: " + strings.Repeat("g", 253) + "}"},
	{name: "sharding of 64 on Leases at the least rate", values: `sharding: {enabled: true, shards: 64}, extraArgs: ["--kube-api-qps=25.6"]`},
	{name: "sharding on sqlite; a rate for no Lease", values: `backend: sqlite, sharding: {enabled: true, shards: 64}, extraArgs: ["--kube-api-qps=1"]`},
	{name: "sharding off; its settings kept", values: "sharding: {enabled: false, shards: 3, group: billing}, readiness: {mode: probe}"},

	// The app health URL: the loopback hosts and listener ports the
	// sidecar accepts, and those it refuses.
	urlCase("http://localhost:8080/healthz", "", ""),
	urlCase("http://LocalHost:8080/healthz", "", ""),
	urlCase("HTTPS://127.0.0.1/healthz", "", ""),
	urlCase("http://127.255.255.254:8080/", "", ""),
	urlCase("http://[::1]:8080/healthz", "", ""),
	urlCase("http://[0:0:0:0:0:0:0:1]:8080/", "", ""),
	urlCase("http://[::0.0.0.1]:8080/", "", ""),
	urlCase("http://[::ffff:127.0.0.1]:8080/", "", ""),
	urlCase("http://[::FFFF:7f00:1]:8080/", "", ""),
	urlCase("http://[::1%25eth0]:8080/", "", ""),
	urlCase("http://127.0.0.1:8080?probe=app", "", ""),
	urlCase("http://127.0.0.1/healthz", "", ""),
	urlCase("http://localhoſt:8080/healthz", "", ""), // EqualFold: ſ is s
	urlCase("http://[0::ffff:127.1.2.3]:8080/", "", ""),
	urlCase("http://127.1/healthz", refusedURL, sidecarShort),
	urlCase("http://127.0.0.1./healthz", refusedURL, sidecarNotLocal),
	urlCase("http://127.0.0.256/healthz", refusedURL, sidecarNotLocal),
	urlCase("http://127.000.0.1/healthz", refusedURL, sidecarNotLocal),
	urlCase("http://localhost./healthz", refusedURL, sidecarNotLocal),
	urlCase("http://10.0.0.7:8080/healthz", refusedURL, sidecarNotLocal),
	urlCase("http://[::2]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://[::127.0.0.1]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://[::ffff:10.0.0.1]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://[::1:0:0:1]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://app:8080/healthz", refusedURL, sidecarNotLocal),
	urlCase("http://[::]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://[::ffff:7e00:1]:8080/", refusedURL, sidecarNotLocal),
	urlCase("http://[::00001]/", "unable to parse url", sidecarNotHTTP),
	urlCase("http://[::1%25]/", "unable to parse url", sidecarNotHTTP),
	urlCase("127.0.0.1:8080", refusedURL, sidecarNotHTTP),
	urlCase("ftp://127.0.0.1/healthz", refusedURL, sidecarNotHTTP),
	urlCase("http:///healthz", refusedURL, sidecarNotHTTP),
	urlCase("http://127.0.0.1:8081/healthz", "sidecar.appHealth.url must not name a port of the sidecar's own (8081", ownListener),
	urlCase("http://localhost:4040/leader", "sidecar.appHealth.url must not name a port of the sidecar's own (4040", ownListener),
	urlCase("http://127.0.0.1:08081/healthz", "sidecar.appHealth.url must not name a port of the sidecar's own (08081", ownListener),
	urlCase("http://127.0.0.1:99999/healthz", "sidecar.appHealth.url must name a port number from 1 to 65535", badPort),
	urlCase("http://127.0.0.1:0/healthz", "sidecar.appHealth.url must name a port number from 1 to 65535", badPort),
	urlCase("http://127.0.0.1:08080/healthz", "", ""),
	{name: "appHealth.url on a moved ops port", values: "opsPort: 9090, appHealth: {url: http://127.0.0.1:9090/readyz}",
		refuse: "sidecar.appHealth.url must not name a port of the sidecar's own (9090", schema: "",
		sidecar: []string{"--ops-address=:9090", "LEADER_SIDECAR_OPS_ADDRESS=:9090", "LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:9090/readyz"}, says: ownListener},
	{name: "appHealth.url on port 80 by default", values: "httpPort: 80, appHealth: {url: http://127.0.0.1/healthz}",
		refuse:  "sidecar.appHealth.url must not name a port of the sidecar's own (80",
		sidecar: []string{"LEADER_SIDECAR_HTTP_ADDRESS=127.0.0.1:80", "LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1/healthz"}, says: ownListener},

	// Refused by the sidecar too.
	{name: "backend etcd", values: "backend: etcd", refuse: "sidecar.backend must be lease, sqlite or postgres", schema: "at '/sidecar/backend'",
		sidecar: []string{"LEADER_SIDECAR_BACKEND=etcd"}, says: "--backend: must be one of"},
	{name: "readiness mode leader-only", values: "readiness: {mode: leader-only}", refuse: "sidecar.readiness.mode must be none, probe, pod-condition or label",
		schema: "at '/sidecar/readiness/mode'", sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=leader-only"}, says: "--readiness-mode: must be one of"},
	{name: "condition type without a domain", values: "readiness: {mode: pod-condition, conditionType: Leader}",
		refuse: "sidecar.readiness.conditionType must be a domain-qualified name", schema: "at '/sidecar/readiness/conditionType'",
		sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=pod-condition", "LEADER_SIDECAR_READINESS_CONDITION_TYPE=Leader"}, says: "--readiness-condition-type"},
	{name: "role label not a label key", values: "readiness: {mode: label, roleLabel: role!}",
		refuse: "sidecar.readiness.roleLabel must be a label key", schema: "at '/sidecar/readiness/roleLabel'",
		sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=label", "LEADER_SIDECAR_ROLE_LABEL=role!"}, says: "--role-label"},
	{name: "condition type with an empty label in its prefix", values: "readiness: {mode: pod-condition, conditionType: a..io/leader}",
		refuse:  "sidecar.readiness.conditionType must be a domain-qualified name",
		sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=pod-condition", "LEADER_SIDECAR_READINESS_CONDITION_TYPE=a..io/leader"}, says: "--readiness-condition-type"},
	{name: "condition type with a name of 64", values: "readiness: {mode: pod-condition, conditionType: a.io/" + strings.Repeat("x", 64) + "}",
		refuse:  "sidecar.readiness.conditionType must be a domain-qualified name",
		sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=pod-condition", "LEADER_SIDECAR_READINESS_CONDITION_TYPE=a.io/" + strings.Repeat("x", 64)}, says: "--readiness-condition-type"},
	{name: "role label with a name of 64", values: "readiness: {mode: label, roleLabel: " + strings.Repeat("x", 64) + "}",
		refuse:  "sidecar.readiness.roleLabel must be a label key",
		sidecar: []string{"LEADER_SIDECAR_READINESS_MODE=label", "LEADER_SIDECAR_ROLE_LABEL=" + strings.Repeat("x", 64)}, says: "--role-label"},
	{name: "lease name of 254", values: "leaseName: " + strings.Repeat("a", 254), refuse: "sidecar.leaseName must be a lowercase RFC 1123 subdomain of at most 253",
		schema: "at '/sidecar/leaseName'", sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=" + strings.Repeat("a", 254)}, says: "--lease-name"},
	{name: "lease name not a DNS name", values: "leaseName: Billing_Job", refuse: "sidecar.leaseName must be a lowercase RFC 1123 subdomain",
		schema: "at '/sidecar/leaseName'", sidecar: []string{"LEADER_SIDECAR_LEASE_NAME=Billing_Job"}, says: "--lease-name"},
	{name: "app health failures 0", values: "appHealth: {url: http://127.0.0.1:8080/, failures: 0}",
		refuse: "sidecar.appHealth.failures must be a whole number of at least 1", schema: "at '/sidecar/appHealth/failures'",
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:8080/", "LEADER_SIDECAR_APP_HEALTH_FAILURES=0"}, says: "--app-health-failures"},
	{name: "app health period 0s", values: "appHealth: {url: http://127.0.0.1:8080/, period: 0s}", refuse: "sidecar.appHealth.period must be greater than 0",
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:8080/", "LEADER_SIDECAR_APP_HEALTH_PERIOD=0s"}, says: "--app-health-period"},
	{name: "app health timeout 0s", values: "appHealth: {url: http://127.0.0.1:8080/, timeout: 0s}", refuse: "sidecar.appHealth.timeout must be greater than 0",
		sidecar: []string{"LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:8080/", "LEADER_SIDECAR_APP_HEALTH_TIMEOUT=0s"}, says: "--app-health-timeout"},
	{name: "lease not above renew", values: "leaseDuration: 10s", refuse: "sidecar.leaseDuration (10s) must be greater than sidecar.renewDeadline (10s)",
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=10s"}, says: "--lease-duration"},
	{name: "lease not whole seconds", values: "leaseDuration: 15500ms", refuse: "sidecar.leaseDuration must be a whole number of seconds",
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=15500ms"}, says: "--lease-duration: must be a whole number of seconds"},
	{name: "renew not above 1.2 x retry", values: "leaseDuration: 5s, renewDeadline: 2400ms", refuse: "sidecar.renewDeadline (2400ms) must be greater than 1.2 x sidecar.retryPeriod (2s)",
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=5s", "LEADER_SIDECAR_RENEW_DEADLINE=2400ms"}, says: "--renew-deadline"},
	{name: "retry 0s", values: "retryPeriod: 0s", refuse: "sidecar.retryPeriod must be greater than 0",
		sidecar: []string{"LEADER_SIDECAR_RETRY_PERIOD=0s"}, says: "--retry-period"},
	{name: "duration without a unit", values: `leaseDuration: "15"`, refuse: "sidecar.leaseDuration must be a duration such as 15s", schema: "at '/sidecar/leaseDuration'",
		sidecar: []string{"LEADER_SIDECAR_LEASE_DURATION=15"}, says: `missing unit in duration "15"`},
	{name: "duration not a duration", values: "renewDeadline: ten", refuse: "sidecar.renewDeadline must be a duration such as 15s", schema: "at '/sidecar/renewDeadline'",
		sidecar: []string{"LEADER_SIDECAR_RENEW_DEADLINE=ten"}, says: `invalid duration "ten"`},
	{name: "renew interval 0s", values: "renewInterval: 0s", refuse: "sidecar.renewInterval must be greater than 0",
		sidecar: []string{"LEADER_SIDECAR_RENEW_INTERVAL=0s"}, says: "--renew-interval: must be greater than 0"},
	{name: "renew interval without room for a retry", values: "renewInterval: 7600ms", refuse: "sidecar.renewInterval (7600ms) must be less than sidecar.renewDeadline (10s) minus 1.2 x sidecar.retryPeriod (2s)",
		sidecar: []string{"LEADER_SIDECAR_RENEW_INTERVAL=7600ms"}, says: "--renew-interval"},
	{name: "record lease bound below the lease", values: "maxRecordLeaseDuration: 14s", refuse: "sidecar.maxRecordLeaseDuration (14s) must be at least sidecar.leaseDuration (15s)",
		sidecar: []string{"LEADER_SIDECAR_MAX_RECORD_LEASE_DURATION=14s"}, says: "--max-record-lease-duration: must be at least the lease duration (15s), got 14s"},
	{name: "await replacement below a millisecond", values: "awaitReplacement: 1500us", refuse: "sidecar.awaitReplacement (1500us) must be a whole number of milliseconds",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=1500us"}, says: "--await-replacement: must be 0 (off) or a positive whole number of milliseconds, got 1.5ms"},
	{name: "await replacement negative", values: `awaitReplacement: "-1s"`, refuse: "sidecar.awaitReplacement must be a duration such as 15s", schema: "at '/sidecar/awaitReplacement'",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=-1s"}, says: "--await-replacement: must be 0 (off) or a positive whole number of milliseconds, got -1s"},
	{name: "await replacement beyond the record lease bound", values: "awaitReplacement: 151s", refuse: "sidecar.awaitReplacement (151s) is beyond the longest a standby leaves the Lease to a replacement",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=151s"}, says: "--await-replacement: 2m31s is beyond --max-record-lease-duration 2m30s"},
	{name: "await replacement without the release", values: "awaitReplacement: 30s, releaseOnShutdown: false", refuse: "sidecar.awaitReplacement needs sidecar.releaseOnShutdown",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=30s", "LEADER_SIDECAR_RELEASE_ON_SHUTDOWN=false"}, says: "--await-replacement: needs --release-on-shutdown"},
	{name: "await replacement; plain container", values: "awaitReplacement: 30s, native: false", refuse: "sidecar.awaitReplacement needs sidecar.releaseOnShutdown (null means true only for a native sidecar)",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=30s", "LEADER_SIDECAR_RELEASE_ON_SHUTDOWN=false"}, says: "--await-replacement: needs --release-on-shutdown"},
	{name: "await replacement in shard mode", values: "awaitReplacement: 30s, sharding: {enabled: true}", refuse: "sidecar.awaitReplacement is not for shard mode",
		sidecar: []string{"LEADER_SIDECAR_AWAIT_REPLACEMENT=30s", "LEADER_SIDECAR_SHARDS=8"}, says: "--await-replacement: not in shard mode (--shards 8)"},
	{name: "port above 65535", values: "httpPort: 70000", refuse: "sidecar.httpPort must be a port number from 1 to 65535, not 70000", schema: "at '/sidecar/httpPort'",
		sidecar: []string{"LEADER_SIDECAR_HTTP_ADDRESS=127.0.0.1:70000"}, says: "--http-address: port must be a number from 0 to 65535"},
	{name: "port not a number", values: "opsPort: ops", refuse: "sidecar.opsPort must be a port number from 1 to 65535, not ops", schema: "at '/sidecar/opsPort'",
		sidecar: []string{"--ops-address=:ops", "LEADER_SIDECAR_OPS_ADDRESS=:ops"}, says: "--ops-address: port must be a number from 0 to 65535"},

	// Shard mode, refused by the sidecar too.
	{name: "sharding of 64 on Leases below the least rate", values: `sharding: {enabled: true, shards: 64}, extraArgs: ["--kube-api-qps", "25.5"]`,
		refuse:  "--kube-api-qps 25.5 (in sidecar.extraArgs or sidecar.extraEnv) cannot carry 64 shards renewed every 5000ms: at least 25.6",
		sidecar: []string{"--kube-api-qps=25.5", "LEADER_SIDECAR_SHARDS=64"}, says: "--kube-api-qps: 25.5 cannot carry 64 shards renewed every 5s"},
	{name: "sharding of 16 on Leases; a rate in extraEnv below the least", values: `renewInterval: 2s, sharding: {enabled: true, shards: 16}, extraEnv: [{name: LEADER_SIDECAR_KUBE_API_QPS, value: "15"}]`,
		refuse:  "--kube-api-qps 15 (in sidecar.extraArgs or sidecar.extraEnv) cannot carry 16 shards renewed every 2000ms: at least 16",
		sidecar: []string{"LEADER_SIDECAR_KUBE_API_QPS=15", "LEADER_SIDECAR_RENEW_INTERVAL=2s", "LEADER_SIDECAR_SHARDS=16"}, says: "--kube-api-qps: 15 cannot carry 16 shards renewed every 2s"},
	{name: "sharding on Leases; the least rate of a derived renew interval", values: `leaseDuration: 3s, renewDeadline: 2500ms, sharding: {enabled: true, shards: 1}, extraArgs: ["--kube-api-qps=39"]`,
		refuse:  "--kube-api-qps 39 (in sidecar.extraArgs or sidecar.extraEnv) cannot carry 1 shards renewed every 50ms: at least 40",
		sidecar: []string{"--kube-api-qps=39", "LEADER_SIDECAR_LEASE_DURATION=3s", "LEADER_SIDECAR_RENEW_DEADLINE=2500ms", "LEADER_SIDECAR_SHARDS=1"}, says: "--kube-api-qps: 39 cannot carry 1 shards renewed every 50ms"},
	{name: "backend postgres without its connection string", values: "backend: postgres",
		refuse: "sidecar.backend postgres needs its connection string"},
	{name: "backend postgres with two connection strings", values: "backend: postgres, postgres: {existingSecret: db, url: \"postgres://db/x\"}",
		refuse: "sidecar.postgres.existingSecret and sidecar.postgres.url exclude each other"},
	{name: "sharding of 257 shards", values: "sharding: {enabled: true, shards: 257}", refuse: "sidecar.sharding.shards must be a whole number from 1 to 256",
		schema: "at '/sidecar/sharding/shards'", sidecar: []string{"LEADER_SIDECAR_SHARDS=257"}, says: "--shards: must be from 0 (one leader) to 256"},
	{name: "sharding; max per member -1", values: "sharding: {enabled: true, maxPerMember: -1}", refuse: "sidecar.sharding.maxPerMember must be a whole number from 0",
		schema: "at '/sidecar/sharding/maxPerMember'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_MAX_PER_MEMBER=-1"}, says: "--shard-max-per-member: must not be negative"},
	{name: "sharding; group not a DNS name", values: "sharding: {enabled: true, group: Billing_Jobs}", refuse: "sidecar.sharding.group must be a lowercase RFC 1123 subdomain",
		schema: "at '/sidecar/sharding/group'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_GROUP=Billing_Jobs"}, says: "--shard-group: \"Billing_Jobs\" is not a valid name"},
	{name: "sharding; group too long for a member's Lease", values: "sharding: {enabled: true, group: " + strings.Repeat("g", 208) + "}", refuse: "must have at most 145 characters with the lease backend, not 208",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_GROUP=" + strings.Repeat("g", 208)}, says: "--shard-group: the group's Lease " + strings.Repeat("g", 208) + "-member-<identity> would not be a valid name"},
	{name: "sharding; lease name too long for a member's Lease", values: "leaseName: " + strings.Repeat("l", 208) + ", sharding: {enabled: true}", refuse: "must have at most 145 characters with the lease backend, not 208",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_LEASE_NAME=" + strings.Repeat("l", 208)}, says: "--shard-group: the group's Lease"},
	{name: "sharding; rebalance delay negative", values: "sharding: {enabled: true, rebalanceDelay: -1s}", refuse: "sidecar.sharding.rebalanceDelay must be a duration such as 15s",
		schema: "at '/sidecar/sharding/rebalanceDelay'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_REBALANCE_DELAY=-1s"}, says: "--shard-rebalance-delay: must not be negative"},
	{name: "sharding; drain timeout not a duration", values: "sharding: {enabled: true, drainTimeout: ten}", refuse: "sidecar.sharding.drainTimeout must be a duration such as 15s",
		schema: "at '/sidecar/sharding/drainTimeout'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_DRAIN_TIMEOUT=ten"}, says: `invalid duration "ten"`},
	{name: "sharding; stop drain timeout negative", values: "sharding: {enabled: true, stopDrainTimeout: -1s}", refuse: "sidecar.sharding.stopDrainTimeout must be a duration such as 15s",
		schema: "at '/sidecar/sharding/stopDrainTimeout'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT=-1s"}, says: "--shard-stop-drain-timeout: must not be negative"},
	{name: "sharding; stop drain timeout not a duration", values: "sharding: {enabled: true, stopDrainTimeout: soon}", refuse: "sidecar.sharding.stopDrainTimeout must be a duration such as 15s",
		schema: "at '/sidecar/sharding/stopDrainTimeout'", sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT=soon"}, says: `invalid duration "soon"`},
	{name: "sharding; readiness probe", values: "readiness: {mode: probe}, sharding: {enabled: true}", refuse: "sidecar.readiness.mode probe publishes one leader; sidecar.sharding takes none",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_READINESS_MODE=probe"}, says: "--shards: --readiness-mode probe publishes one leader"},
	{name: "sharding; readiness label", values: "readiness: {mode: label}, sharding: {enabled: true}", refuse: "sidecar.readiness.mode label publishes one leader",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_READINESS_MODE=label"}, says: "--shards: --readiness-mode label publishes one leader"},
	{name: "sharding; app health", values: "appHealth: {url: http://127.0.0.1:8080/healthz}, sharding: {enabled: true}", refuse: "sidecar.appHealth.url gates one election",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_APP_HEALTH_URL=http://127.0.0.1:8080/healthz"}, says: "--shards: --app-health-url gates one election"},
	{name: "sharding; no release on shutdown", values: "releaseOnShutdown: false, sharding: {enabled: true}", refuse: "sidecar.sharding does not take sidecar.releaseOnShutdown false",
		sidecar: []string{"LEADER_SIDECAR_SHARDS=8", "LEADER_SIDECAR_RELEASE_ON_SHUTDOWN=false"}, says: "it does not take --release-on-shutdown=false"},

	// Shard mode, the chart's own rules.
	{name: "sharding of 0 shards", values: "sharding: {enabled: true, shards: 0}", refuse: "sidecar.sharding.shards must be a whole number from 1 to 256", schema: "at '/sidecar/sharding/shards'"},
	{name: "sharding; group just too long for any Pod name", values: "sharding: {enabled: true, group: " + strings.Repeat("g", 146) + "}", refuse: "must have at most 145 characters with the lease backend, not 146"},
	{name: "sharding; wait for leadership", values: "waitForLeadership: true, sharding: {enabled: true}", refuse: "sidecar.waitForLeadership waits for one leader"},
	{name: "sharding; Lease created", values: "lease: {create: true}, sharding: {enabled: true}", refuse: "sidecar.lease.create creates the single election's Lease"},
	{name: "sharding not a map", values: "sharding: true", refuse: "sidecar.sharding must be a map", schema: "at '/sidecar/sharding'"},

	// The chart's own rules: what the sidecar never sees (the image, the
	// Pod, the volume, the Lease object) or cannot check alone.
	{name: "digest not sha256", values: "image: {digest: md5:abc}", refuse: "sidecar.image.digest must be sha256: and 64 hex digits", schema: "at '/sidecar/image/digest'"},
	{name: "backend auto", values: "backend: auto", refuse: "sidecar.backend must be lease, sqlite or postgres", schema: "at '/sidecar/backend'"},
	{name: "app health with wait for leadership", values: "waitForLeadership: true, appHealth: {url: http://127.0.0.1:8080/}",
		refuse: "sidecar.appHealth.url and sidecar.waitForLeadership exclude each other"},
	{name: "wait for leadership of a plain container", values: "native: false, waitForLeadership: true", refuse: "sidecar.waitForLeadership needs sidecar.native true"},
	{name: "Lease created for sqlite", values: "backend: sqlite, lease: {create: true}", refuse: "sidecar.lease.create is for sidecar.backend lease"},
	{name: "sqlite volume of another type", values: "backend: sqlite, sqlite: {volume: {type: emptyDir}}", refuse: "sidecar.sqlite.volume.type must be hostPath or persistentVolumeClaim",
		schema: "at '/sidecar/sqlite/volume/type'"},
	{name: "claim without a name", values: "backend: sqlite, sqlite: {volume: {type: persistentVolumeClaim}}",
		refuse: "sidecar.sqlite.volume.claimName is required", schema: "at '/sidecar/sqlite/volume/claimName'"},
	// Both listeners on one port: the sidecar, given 127.0.0.1:4040 and
	// :4040, passes its checks and dies at start.
	{name: "ops port is the app API's", values: "opsPort: 4040", refuse: "sidecar.opsPort (4040) must differ from sidecar.httpPort (4040)"},
	{name: "securityContext not a map", values: "securityContext: root", refuse: "sidecar.securityContext must be a map", schema: "at '/sidecar/securityContext'"},
	{name: "negative uid", values: "securityContext: {runAsUser: -1}", refuse: "sidecar.securityContext.runAsUser must be a uid", schema: "at '/sidecar/securityContext/runAsUser'"},
}

// The charts and the sidecar accept and refuse the same settings: every
// rendering of every case, in the example chart and in a helm create
// chart with the library, has its sidecar container's arguments and
// environment run through the real binary's sidecar check, which must
// accept them; and every setting the sidecar refuses, the charts refuse at
// render time. A drift would otherwise crash-loop Pods after a clean helm
// install.
func TestChartAndSidecarAgree(t *testing.T) {
	bin := sidecartest.Binary(t)
	dir := sidecartest.Charts(t)
	mychart := sidecartest.HelmCreateWithLibrary(t)
	charts := []struct {
		name   string
		render func(t *testing.T, values string) (string, error)
	}{
		{"example", func(t *testing.T, values string) (string, error) {
			return sidecartest.TemplateChart(t, dir, "apps", values)
		}},
		{"helm create", func(t *testing.T, values string) (string, error) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
				t.Fatal(err)
			}
			return sidecartest.RunHelm(t, "template", "shop", mychart, "--namespace", "apps", "--values", file)
		}},
	}
	out, err := charts[0].render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	defaults := sidecarContainers(t, sidecartest.DecodeManifests(t, out))[0]
	for _, c := range agreementCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.sidecar != nil {
				if c.refuse == "" {
					t.Fatal("a case the sidecar refuses must be one the charts refuse")
				}
				args, env := containerCommand(t, defaults)
				args, env = override(args, env, c.sidecar)
				code, stderr := sidecartest.SidecarCheck(t, bin, args, env)
				if code != 2 || !strings.Contains(stderr, c.says) {
					t.Errorf("sidecar check with %v: exit %d, %q; want 2 and %q", c.sidecar, code, stderr, c.says)
				}
			}
			for _, chart := range charts {
				out, err := chart.render(t, "sidecar: {"+c.values+"}\n")
				if err != nil {
					want := c.refuse
					if chart.name == "example" && c.schema != "" {
						want = c.schema
					}
					if want == "" || !strings.Contains(err.Error(), want) {
						t.Errorf("%s chart: %v\nwant it rendered%s", chart.name, err, map[bool]string{true: ", or refused with " + want}[want != ""])
					}
					continue
				}
				if c.refuse != "" {
					t.Errorf("%s chart rendered %s; want it refused with %q", chart.name, c.values, c.refuse)
				}
				for _, sc := range sidecarContainers(t, sidecartest.DecodeManifests(t, out)) {
					args, env := containerCommand(t, sc)
					if code, stderr := sidecartest.SidecarCheck(t, bin, args, env); code != 0 {
						t.Errorf("%s chart renders %s, and its sidecar %s would exit %d: %s", chart.name, c.values, sc.Name, code, stderr)
					}
				}
			}
		})
	}
}

// sidecarContainers is every container of every rendered Pod template that
// runs the sidecar (it is given LEADER_SIDECAR_BACKEND); none fails t.
func sidecarContainers(t *testing.T, r *sidecartest.Rendered) []corev1.Container {
	t.Helper()
	var pods []corev1.PodSpec
	for _, d := range sidecartest.Find[*appsv1.Deployment](t, r) {
		pods = append(pods, d.Spec.Template.Spec)
	}
	for _, s := range sidecartest.Find[*appsv1.StatefulSet](t, r) {
		pods = append(pods, s.Spec.Template.Spec)
	}
	for _, j := range sidecartest.Find[*batchv1.CronJob](t, r) {
		pods = append(pods, j.Spec.JobTemplate.Spec.Template.Spec)
	}
	var out []corev1.Container
	for _, p := range pods {
		for _, c := range append(p.InitContainers, p.Containers...) {
			if _, ok := sidecartest.EnvOf(&c)["LEADER_SIDECAR_BACKEND"]; ok {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no rendered container runs the sidecar")
	}
	return out
}

// downward is what the kubelet would give the Downward API fields the
// charts use, for a Pod p in namespace ns.
var downward = map[string]string{"metadata.name": "p", "metadata.namespace": "ns", "metadata.uid": "6f0c3a52-0d4e-4c52-9d5e-2b1f3c4d5e6f",
	"metadata.labels['pod-template-hash']": "7d9f5c8b4", "metadata.labels['controller-revision-hash']": ""}

// containerCommand is the sidecar's arguments in container c (the image's
// entrypoint is the sidecar) and its environment as the kubelet would give
// it: the literal values, the Downward API's, and the in-cluster
// variables. A value it cannot resolve fails t.
func containerCommand(t *testing.T, c corev1.Container) (args, env []string) {
	t.Helper()
	if len(c.Command) != 0 {
		t.Fatalf("container %s has a command %v: the sidecar is the image's entrypoint", c.Name, c.Command)
	}
	env = []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			f := e.ValueFrom.FieldRef
			v, ok := "", false
			switch {
			case f != nil:
				v, ok = downward[f.FieldPath]
			case e.ValueFrom.SecretKeyRef != nil && e.Name == "LEADER_SIDECAR_POSTGRES_URL":
				// The Secret's connection string, which the test cannot
				// read: one that parses, as the user's must.
				v, ok = "postgres://app@db.example:5432/orders", true
			}
			if !ok {
				t.Fatalf("container %s: cannot resolve %s from %+v", c.Name, e.Name, e.ValueFrom)
			}
			value = v
		}
		env = append(env, e.Name+"="+value)
	}
	return c.Args, env
}

// override is args and env with each of over set: --flag=value replaces
// the argument of that flag, NAME=value the variable of that name (or
// each is added).
func override(args, env, over []string) ([]string, []string) {
	set := func(list []string, kv string) []string {
		name, _, _ := strings.Cut(kv, "=")
		out := []string{}
		for _, e := range list {
			if n, _, _ := strings.Cut(e, "="); n != name {
				out = append(out, e)
			}
		}
		return append(out, kv)
	}
	for _, kv := range over {
		if strings.HasPrefix(kv, "--") {
			args = set(args, kv)
		} else {
			env = set(env, kv)
		}
	}
	return args, env
}

// sidecar.sharding.stopDrainTimeout null is 0s for a native sidecar,
// which the kubelet stops after the app (nothing is left to acknowledge a
// drain), and drainTimeout for a plain container, beside an app that may
// still run; a value given is rendered as it is.
func TestChartStopDrainTimeoutFollowsTheSidecarKind(t *testing.T) {
	dir := sidecartest.Charts(t)
	for _, c := range []struct{ values, want string }{
		{"sharding: {enabled: true, drainTimeout: 45s}", "0s"},
		{"native: false, sharding: {enabled: true, drainTimeout: 45s}", "45s"},
		{"sharding: {enabled: true, stopDrainTimeout: 10s}", "10s"},
		{"native: false, sharding: {enabled: true, stopDrainTimeout: 0s}", "0s"},
	} {
		out, err := sidecartest.TemplateChart(t, dir, "apps", "sidecar: {"+c.values+"}\n")
		if err != nil {
			t.Fatalf("%s: %v", c.values, err)
		}
		containers := sidecarContainers(t, sidecartest.DecodeManifests(t, out))
		for _, sc := range containers {
			got, found := "", false
			for _, e := range sc.Env {
				if e.Name == "LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT" {
					got, found = e.Value, true
				}
			}
			if !found || got != c.want {
				t.Errorf("%s: the sidecar %s has LEADER_SIDECAR_SHARD_STOP_DRAIN_TIMEOUT %q (set: %v), want %q", c.values, sc.Name, got, found, c.want)
			}
		}
		if len(containers) == 0 {
			t.Errorf("%s: no sidecar rendered", c.values)
		}
	}
}
