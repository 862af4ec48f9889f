package inject

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The injector chart lints clean (helm lint --strict: no warning, no
// error) on Helm 3 and Helm 4, with its defaults and with the
// per-namespace part on; its schema refuses a bad setting.

// lintValues are the values the chart is linted with.
var lintValues = []string{
	"",
	"namespaces:\n  - {namespace: shop, serviceAccount: orders, createServiceAccount: true, lease: orders}\n" +
		"  - {namespace: jobs, serviceAccount: batch, lease: nightly, readinessMode: pod-condition, events: false,\n" +
		"     settings: {logLevel: debug, waitForLeadership: true}}\n" +
		"  - {namespace: web, serviceAccount: web, lease: web, readinessMode: label}\n" +
		"  - {namespace: cron, serviceAccount: cron, lease: cron, podDeletionCost: false}\n",
	"image:\n  digest: sha256:" + strings.Repeat("0", 64) + "\nresources:\n  limits:\n    cpu: 100m\n    memory: 64Mi\n" +
		"excludedNamespaces: [kube-system, kube-public]\n",
}

func TestInjectorChartLint(t *testing.T) {
	chart := sidecartest.RepoPath(t, "charts", "leader-sidecar-injector")
	for _, h := range []struct {
		name string
		bin  func(testing.TB) string
	}{{"helm 3", sidecartest.Helm}, {"helm 4", sidecartest.Helm4}} {
		t.Run(h.name, func(t *testing.T) {
			bin, home := h.bin(t), t.TempDir()
			for _, values := range lintValues {
				file := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, "lint", "--strict", chart, "--values", file)
				cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
					"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
				out, err := cmd.CombinedOutput()
				if err != nil || strings.Contains(string(out), "[WARNING]") || strings.Contains(string(out), "[ERROR]") {
					t.Fatalf("helm lint --strict with %q: %v\n%s", values, err, out)
				}
			}
		})
	}
}

// TestInjectorChartSchema: the values schema refuses what the policy could
// not use.
func TestInjectorChartSchema(t *testing.T) {
	for _, bad := range []string{
		"defaults:\n  readinessMode: leader\n",
		"defaults:\n  leaseDuration: 15\n",
		"namespaces:\n  - {namespace: shop, lease: orders}\n",
		"imageTag: v1\n",
	} {
		if _, err := renderInjector(t, bad); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("values %q: %v, want refused by the schema", bad, err)
		}
	}
}

// TestInjectorChartNamespacePart: an entry of namespaces renders the
// Role of the library chart's least privilege for its mode, bound to its
// ServiceAccount, and the ServiceAccount itself where the entry says
// createServiceAccount.
func TestInjectorChartNamespacePart(t *testing.T) {
	out, err := renderInjector(t, lintValues[1])
	if err != nil {
		t.Fatal(err)
	}
	r := sidecartest.DecodeManifests(t, out)
	rules := map[string]string{}
	var accounts []string
	for _, o := range r.Raw {
		if o.GetKind() == "ServiceAccount" {
			accounts = append(accounts, o.GetNamespace()+"/"+o.GetName())
		}
		if o.GetKind() == "Role" {
			rules[o.GetNamespace()] = strings.Join(strings.Fields(stringify(o.Object["rules"])), " ")
		}
		if o.GetKind() == "RoleBinding" {
			subjects := stringify(o.Object["subjects"])
			if !strings.Contains(subjects, "namespace:"+o.GetNamespace()) {
				t.Errorf("RoleBinding %s/%s binds %s", o.GetNamespace(), o.GetName(), subjects)
			}
		}
	}
	for ns, want := range map[string][]string{
		"shop": {"resourceNames:[orders]", "events", "resources:[pods] verbs:[get patch]"},
		"jobs": {"resourceNames:[nightly]", "pods/status", "resources:[pods] verbs:[get patch]"},
		"web":  {"resourceNames:[web]", "verbs:[get patch]"},
	} {
		for _, w := range want {
			if !strings.Contains(rules[ns], w) {
				t.Errorf("the Role of %s has rules %s, want %s", ns, rules[ns], w)
			}
		}
	}
	if want := []string{"shop/orders"}; !slices.Equal(accounts, want) {
		t.Errorf("ServiceAccounts %v, want %v (the one entry with createServiceAccount)", accounts, want)
	}
	if strings.Contains(rules["cron"], "pods") {
		t.Errorf("the Role of cron grants pods with podDeletionCost: false and readiness none: %s", rules["cron"])
	}
	if strings.Contains(rules["jobs"], "events") {
		t.Errorf("the Role of jobs grants events with events: false: %s", rules["jobs"])
	}
}

// TestInjectorChartRefusesOlderKubernetes: on a cluster older than 1.36
// helm refuses the chart (its kubeVersion), naming the requirement, before
// it creates anything.
func TestInjectorChartRefusesOlderKubernetes(t *testing.T) {
	chart := sidecartest.RepoPath(t, "charts", "leader-sidecar-injector")
	_, err := sidecartest.RunHelm(t, "template", "injector", chart, "--kube-version", "v1.35.4")
	if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.36.0-0") {
		t.Fatalf("helm template for Kubernetes v1.35.4: %v, want refused for the chart's kubeVersion", err)
	}
	if _, err := sidecartest.RunHelm(t, "template", "injector", chart, "--kube-version", "v1.36.0"); err != nil {
		t.Fatalf("helm template for Kubernetes v1.36.0: %v", err)
	}
}
