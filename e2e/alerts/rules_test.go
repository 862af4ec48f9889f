package alerts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// runbooks is where every alert's runbook_url points, before the anchor.
const runbooks = "https://github.com/leader-sidecar/leader-sidecar/blob/main/docs/alerts.md"

// The rule file is valid for Prometheus: promtool parses every expression
// and template.
func TestAlertRulesPassPromtoolCheck(t *testing.T) {
	out := runPromtool(t, "check", "rules", sidecartest.RepoPath(t, ruleFile...))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
}

// promtool's unit tests pass: every alert fires on its input series, with
// its labels and annotations, and stays quiet where it should.
func TestAlertRulesUnitTestsPass(t *testing.T) {
	out := runPromtool(t, "test", "rules", unitTests)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

// unitTestFile is the part of promtool's unit-test file these tests read.
type unitTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name  string `json:"name"`
		Cases []struct {
			EvalTime  string `json:"eval_time"`
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readUnitTests(t *testing.T) ([]byte, unitTestFile) {
	t.Helper()
	raw, err := os.ReadFile(unitTests)
	if err != nil {
		t.Fatal(err)
	}
	var f unitTestFile
	if err := sigsyaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return raw, f
}

// The unit tests load the rule file itself, and check every alert both
// firing (an expected alert) and not firing (none expected).
func TestEveryAlertIsTestedFiringAndNotFiring(t *testing.T) {
	_, f := readUnitTests(t)
	want := sidecartest.RepoPath(t, ruleFile...)
	if len(f.RuleFiles) != 1 || filepath.Join(filepath.Dir(absUnitTests(t)), f.RuleFiles[0]) != want {
		t.Fatalf("rule_files %v, want the one file %s", f.RuleFiles, want)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, test := range f.Tests {
		for _, c := range test.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.AlertName] = true
			} else {
				quiet[c.AlertName] = true
			}
		}
	}
	for _, r := range alerts(t) {
		if !fires[r.Alert] {
			t.Errorf("%s: no unit test where it fires", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no unit test where it does not fire", r.Alert)
		}
	}
}

func absUnitTests(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(unitTests)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// The unit tests notice a rule that is not robust against a move's or a
// hand-off's scrape skew: held for 0m, LeaderSidecarMultipleLeaders fires
// on the single scrape where both the old and the new leader read 1 and
// LeaderSidecarNoLeader on the single scrape where none does; in the
// shard group shop/orders, LeaderSidecarShardHeldTwice and
// LeaderSidecarShardUnowned fire on the same skew of a shard's move,
// LeaderSidecarShardDrainStuck on a drain that ended in time, and
// LeaderSidecarShardMembersDisagree on the scrapes between a member's
// coming or going and the other replica's next listing, and
// LeaderSidecarShardLeaseStale on shop/rollout's shard Leases, unrenewed
// for one evaluation past the threshold while the group is stopped and
// started again.
func TestUnitTestsRefuseRulesWithoutFor(t *testing.T) {
	for _, c := range []struct{ alert, lease string }{
		{"LeaderSidecarMultipleLeaders", "handoff"},
		{"LeaderSidecarNoLeader", "handoff"},
		{"LeaderSidecarShardHeldTwice", "orders"},
		{"LeaderSidecarShardUnowned", "orders"},
		{"LeaderSidecarShardDrainStuck", "orders"},
		{"LeaderSidecarShardMembersDisagree", "orders"},
		{"LeaderSidecarShardLeaseStale", "rollout"},
	} {
		t.Run(c.alert, func(t *testing.T) {
			out, err := unitTestsWithRule(t, c.alert, func(r map[string]any) { r["for"] = "0m" })
			if err == nil {
				t.Fatalf("the unit tests pass with %s held for 0m:\n%s", c.alert, out)
			}
			if !strings.Contains(out, `lease="`+c.lease+`"`) {
				t.Fatalf("the unit tests fail with %s held for 0m, but not on lease %s:\n%s", c.alert, c.lease, out)
			}
		})
	}
}

// The unit tests notice a rule that judges shard groups wrongly:
// LeaderSidecarFlapping counting a group's shard terms as one election's
// (shop/churn began 10 in 5 minutes, 5 per shard), and a shard rule that
// reads leader_election_master_status by its name alone, as docs once
// showed, and so judges a client-go component's gauge named like a shard
// (cache-shard-0, whose standby reports 0); and a stale shard Lease rule
// that judges each shard Lease by itself (shop/shrunk's Leases of shards
// beyond its lowered --shards are renewed no more, though the group runs)
// or any Lease named like a shard's (another component's cache-shard-0,
// with no group of that name), or a group's Leases left over once it is one
// election again (shop/unsharded); and LeaderSidecarLeaseStale judging the
// Lease an election left when it was made a group (shop/migrated).
func TestUnitTestsRefuseRulesThatMisjudgeShardGroups(t *testing.T) {
	for _, c := range []struct {
		alert, want string
		change      func(t *testing.T, expr string) string
	}{
		{"LeaderSidecarFlapping", `lease="churn"`, func(t *testing.T, expr string) string {
			return cutAt(t, expr, " unless on (namespace, lease)")
		}},
		{"LeaderSidecarShardUnowned", `name="cache-shard-0"`, func(*testing.T, string) string {
			return `sum by (namespace, name) (leader_election_master_status{name=~".+-shard-[0-9]+"}) == 0`
		}},
		{"LeaderSidecarShardLeaseStale", `lease="shrunk"`, func(t *testing.T, expr string) string {
			return replaceOnce(t, expr, "time() - max by", "time() - min by")
		}},
		{"LeaderSidecarShardLeaseStale", `lease="cache"`, func(t *testing.T, expr string) string {
			return cutAt(t, expr, " and on (namespace, lease)")
		}},
		{"LeaderSidecarShardLeaseStale", `lease="unsharded"`, func(t *testing.T, expr string) string {
			return cutAt(t, expr, " unless on (namespace, lease)")
		}},
		{"LeaderSidecarLeaseStale", `lease="migrated"`, func(t *testing.T, expr string) string {
			return cutAt(t, expr, " unless on (namespace, lease)")
		}},
	} {
		t.Run(c.alert+" on "+strings.ReplaceAll(c.want, `"`, ""), func(t *testing.T) {
			out, err := unitTestsWithRule(t, c.alert, func(r map[string]any) { r["expr"] = c.change(t, r["expr"].(string)) })
			if err == nil {
				t.Fatalf("the unit tests pass with %s changed:\n%s", c.alert, out)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("the unit tests fail with %s changed, but not on %s:\n%s", c.alert, c.want, out)
			}
		})
	}
}

// cutAt is expr up to sep, which it must hold.
func cutAt(t *testing.T, expr, sep string) string {
	t.Helper()
	before, _, found := strings.Cut(expr, sep)
	if !found {
		t.Fatalf("no %q in %q", sep, expr)
	}
	return before
}

// unitTestsWithRule runs the unit tests on a copy of the rule file in
// which change has altered the rule of alert, and returns promtool's
// output and error.
func unitTestsWithRule(t *testing.T, alert string, change func(rule map[string]any)) (string, error) {
	t.Helper()
	var file map[string]any
	if err := sigsyaml.Unmarshal(readRuleFile(t), &file); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range file["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if r := r.(map[string]any); r["alert"] == alert {
				change(r)
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no rule %s", alert)
	}
	dir := t.TempDir()
	mutated, err := sigsyaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), mutated, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, _ := readUnitTests(t)
	tests := regexp.MustCompile(`(?m)^rule_files:\n  - .*$`).
		ReplaceAllString(string(raw), "rule_files:\n  - alerts.yaml")
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	return tryPromtool(t, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
}

// Every alert has a severity, a summary, a description and a runbook_url
// pointing to its own section of docs/alerts.md; every section there is an
// alert's.
func TestEveryAlertHasAnnotationsAndARunbook(t *testing.T) {
	doc, err := os.ReadFile(sidecartest.RepoPath(t, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections = append(sections, m[1])
	}
	var names []string
	for _, r := range alerts(t) {
		names = append(names, r.Alert)
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
		if want := runbooks + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if r.For == "" {
			t.Errorf("%s: no for:", r.Alert)
		}
		if !slices.Contains(sections, r.Alert) {
			t.Errorf("%s: no section \"## %s\" in docs/alerts.md", r.Alert, r.Alert)
		}
	}
	for _, s := range sections {
		if !slices.Contains(names, s) {
			t.Errorf("docs/alerts.md: section %q is no alert's", s)
		}
	}
}
