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
// What they need besides Go: promtool (Debian: apt-get install prometheus;
// hack/test-deps.sh installs it when missing), and helm ($HELM, else what
// hack/helm.sh builds). Without promtool the tests fail, never skip.
//
//	go test -count=1 ./e2e/alerts/
package alerts
