// Package alerts holds the tests of the sidecar's Prometheus alerts,
// charts/leader-sidecar-lib/files/alerts.yaml, on the real promtool:
// `promtool check rules` on the file, and `promtool test rules` with
// testdata/alerts_test.yaml, whose input series make every alert fire and
// not fire (a hand-off's scrape skew among the latter). Every alert has a
// severity, a summary, a description and a runbook section in
// docs/alerts.md. The example chart's PrometheusRule, rendered by the
// pinned helm, holds the file's groups unchanged, and changed only as its
// values tune them.
//
// Live: a Prometheus server of the test's own (loopback, a free port, 1s
// scrape and evaluation intervals, a temporary storage directory) scrapes
// three sidecar processes of one election on one SQLite file, with the
// chart's rules rendered with short for: durations through the chart's
// tuning values; the alerts go pending, fire and resolve as every app turns
// unhealthy and healthy again, and every query of the Grafana dashboard
// (files/dashboard.json, also rendered as the charts' ConfigMap) returns
// data. Beside it, another Prometheus scrapes two sidecars of a shard
// group: no alert while the shards are spread, every query of the
// dashboard's shard row returns data, and a replica killed leaves its
// shards to one LeaderSidecarShardUnowned each and no other alert.
// promtool check metrics passes on a real sidecar's /metrics, in both
// modes.
//
// What they need besides Go: promtool and prometheus (Debian: apt-get
// install prometheus; hack/test-deps.sh installs it when missing), and
// helm ($HELM, else what hack/helm.sh builds). Without either binary the
// tests fail, never skip.
//
//	go test -count=1 ./e2e/alerts/
package alerts
