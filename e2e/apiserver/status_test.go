package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/lease"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// statusRow is what the tests read of a row of status -o json.
type statusRow struct {
	Namespace            string   `json:"namespace"`
	Name                 string   `json:"name"`
	Holder               string   `json:"holder"`
	Token                int64    `json:"token"`
	LeaseDurationSeconds int32    `json:"leaseDurationSeconds"`
	TermAgeSeconds       *float64 `json:"termAgeSeconds"`
	SinceRenewalSeconds  *float64 `json:"sinceRenewalSeconds"`
	Handoff              *struct {
		Phase   string `json:"phase"`
		From    string `json:"from"`
		To      string `json:"to"`
		Token   int64  `json:"token"`
		Pending bool   `json:"pending"`
	} `json:"handoff"`
	State       string     `json:"state"`
	Stale       bool       `json:"stale"`
	ClaimFrom   *time.Time `json:"claimFrom"`
	AcquireTime *time.Time `json:"acquireTime"`
	Version     string     `json:"version"`
}

// TestStatus runs sidecar status, the real binary, on the real API
// server: real sidecars elect in two namespaces, and the lease backend
// writes two more records as they are at rest: a holder that stopped
// renewing a minute ago (15s lease) and a leader offering a hand-off. A
// node-style heartbeat Lease is no election. The table, -o json, -o wide,
// -A, the namespace of the kubeconfig's context, the kubectl-leader name,
// and --watch while leadership moves. The first candidate of a new Lease
// names itself at once but claims it a lease duration later: until then
// its row says the claim is pending.
func TestStatus(t *testing.T) {
	t.Parallel()
	k := sidecartest.Kube(t)
	kc := k.Kubeconfig(t, "")
	web, jobs := k.Namespace(t), k.Namespace(t)
	webSidecars := []*sidecartest.Sidecar{
		sidecartest.LeaseSidecar(t, kc, web, "web", "web-0"),
		sidecartest.LeaseSidecar(t, kc, web, "web", "web-1"),
	}
	jobsSidecar := sidecartest.LeaseSidecar(t, kc, jobs, "jobs", "jobs-0")

	now := time.Now()
	writeRecord(t, jobs, "reports", backend.Record{HolderIdentity: "reports-0_gone", LeaseDurationSeconds: 15, Transitions: 3,
		AcquireTime: now.Add(-2 * time.Minute), RenewTime: now.Add(-time.Minute)})
	writeRecord(t, jobs, "orders", backend.Record{HolderIdentity: "orders-0_a", LeaseDurationSeconds: 15, Transitions: 7,
		AcquireTime: now.Add(-time.Hour), RenewTime: now,
		Handoff: backend.Handoff{Phase: backend.HandoffOffer, From: "orders-0_a", To: "orders-1", Token: 7}})
	heartbeat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: now}}}
	if _, err := k.Client.CoordinationV1().Leases(jobs).Create(context.Background(), heartbeat, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The jobs Lease is new: its first row names jobs-0, claim pending.
	bin := sidecartest.Binary(t)
	var first statusRow
	for deadline := time.Now().Add(15 * time.Second); first.Name == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no row of the jobs Lease within 15s")
		}
		for _, r := range statusJSON(t, bin, "status", "--kubeconfig", kc, "-n", jobs, "-o", "json") {
			if r.Name == "jobs" {
				first = r
			}
		}
	}
	if first.State != "pending" || first.Stale || first.SinceRenewalSeconds != nil || first.ClaimFrom == nil || first.AcquireTime == nil ||
		!first.ClaimFrom.Equal(first.AcquireTime.Add(sidecartest.LeaseDuration)) {
		t.Fatalf("first row of the new jobs Lease: %+v, want its claim pending until a lease after its acquire time", first)
	}
	webLeader, webToken := sidecartest.AwaitLeader(t, webSidecars, 15*time.Second)
	_, jobsToken := sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{jobsSidecar}, 15*time.Second)
	webHolder, jobsHolder := sidecartest.IdentityOf(t, webLeader), sidecartest.IdentityOf(t, jobsSidecar)

	began := time.Now()
	out := status(t, bin, nil, "status", "--kubeconfig", kc, "-n", web)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME HOLDER TOKEN TERM RENEWED LEASE HANDOFF STATE" {
		t.Fatalf("table of %s:\n%s", web, out)
	}
	if f := strings.Fields(lines[1]); len(f) != 9 || f[0] != "web" || f[1] != webHolder || f[2] != fmt.Sprint(webToken) ||
		f[6] != "3s" || f[7] != "-" || f[8] != "held" {
		t.Fatalf("row of web %q, want holder %s, token %d, lease 3s, held", lines[1], webHolder, webToken)
	}
	t.Logf("sidecar status, table: %v", time.Since(began).Round(time.Millisecond))

	rows := statusJSON(t, bin, "status", "--kubeconfig", kc, "-n", jobs, "-o", "json")
	byName := map[string]statusRow{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	if len(rows) != 3 || rows[0].Name != "jobs" || rows[1].Name != "orders" || rows[2].Name != "reports" {
		t.Fatalf("-o json in %s: %+v, want jobs, orders, reports (not the heartbeat node-1)", jobs, rows)
	}
	if r := byName["jobs"]; r.Namespace != jobs || r.Holder != jobsHolder || r.Token != jobsToken || r.State != "held" || r.Stale ||
		r.LeaseDurationSeconds != 3 || r.SinceRenewalSeconds == nil || r.TermAgeSeconds == nil || r.Handoff != nil || r.Version == "" {
		t.Fatalf("jobs: %+v", r)
	}
	if r := byName["reports"]; r.Holder != "reports-0_gone" || r.Token != 3 || !r.Stale || r.State != "stale" ||
		r.SinceRenewalSeconds == nil || *r.SinceRenewalSeconds < 60 || *r.TermAgeSeconds < 120 {
		t.Fatalf("reports, whose holder stopped renewing a minute ago: %+v", r)
	}
	if r := byName["orders"]; r.State != "held" || r.Handoff == nil || !r.Handoff.Pending || r.Handoff.Phase != "offer" ||
		r.Handoff.To != "orders-1" || r.Handoff.Token != 7 {
		t.Fatalf("orders, offering a hand-off: %+v", r)
	}
	out = status(t, bin, nil, "status", "--kubeconfig", kc, "-n", jobs)
	if !strings.Contains(out, "offered to orders-1") || strings.Contains(out, "node-1") {
		t.Fatalf("table of %s, want the offer and no heartbeat:\n%s", jobs, out)
	}
	if all := status(t, bin, nil, "status", "--kubeconfig", kc, "-n", jobs, "--all-leases"); !strings.Contains(all, "node-1") {
		t.Fatalf("--all-leases, no heartbeat Lease:\n%s", all)
	}

	out = status(t, bin, nil, "status", "--kubeconfig", kc, "-n", web, "-o", "wide")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "STATE ACQUIRE-TIME RENEW-TIME VERSION") ||
		len(strings.Fields(lines[1])) != 12 {
		t.Fatalf("-o wide:\n%s", out)
	}

	out = status(t, bin, nil, "status", "--kubeconfig", kc, "-A")
	for _, want := range []string{web + " web " + webHolder, jobs + " jobs " + jobsHolder, jobs + " reports reports-0_gone"} {
		if !strings.Contains(squeeze(out), want) {
			t.Fatalf("-A: no row %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "node-1") || !strings.HasPrefix(out, "NAMESPACE") {
		t.Fatalf("-A:\n%s", out)
	}

	// No -n: the namespace of the kubeconfig's context, as kubectl; and
	// the same binary as kubectl-leader takes the command first.
	withNS := contextNamespace(t, kc, jobs)
	plugin := filepath.Join(t.TempDir(), "kubectl-leader")
	if err := os.Symlink(bin, plugin); err != nil {
		t.Fatal(err)
	}
	out = status(t, plugin, []string{"KUBECONFIG=" + withNS}, "status")
	if !strings.Contains(squeeze(out), "jobs "+jobsHolder) || strings.Contains(out, webHolder) {
		t.Fatalf("kubectl-leader status with the context's namespace %s:\n%s", jobs, out)
	}
	if code, stderr := statusFails(t, plugin, "status", "--kubeconfig", kc, "-o", "yaml"); code != 2 ||
		!strings.HasPrefix(stderr, "kubectl leader status: --output") {
		t.Fatalf("kubectl-leader status -o yaml: exit %d, %q", code, stderr)
	}
	if code, stderr := statusFails(t, plugin); code != 2 || !strings.Contains(stderr, "Usage: kubectl leader status") {
		t.Fatalf("kubectl-leader alone: exit %d, %q", code, stderr)
	}

	// --watch: the leader stops (and releases), the standby takes over;
	// the row with the new holder and the next token shows as it happens.
	watch := exec.Command(bin, "status", "--kubeconfig", kc, "-n", web, "--watch", "-o", "json")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	watch.Stderr = &stderr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	seen := make(chan statusRow, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r statusRow
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				seen <- r
			}
		}
		close(seen)
	}()
	awaitRow(t, seen, 10*time.Second, func(r statusRow) bool { return r.Holder == webHolder && r.Token == webToken })
	stopped := time.Now()
	webLeader.Signal(syscall.SIGTERM)
	next := sidecartest.Without(webSidecars, webLeader)[0]
	row := awaitRow(t, seen, 10*time.Second, func(r statusRow) bool { return r.Holder != webHolder && r.Holder != "" })
	shown := time.Since(stopped)
	if row.Holder != sidecartest.IdentityOf(t, next) || row.Token != webToken+1 || row.State != "held" {
		t.Fatalf("--watch after the leader stopped: %+v, want %s with token %d", row, sidecartest.IdentityOf(t, next), webToken+1)
	}
	t.Logf("--watch showed the new leader %v after the old one was told to stop", shown.Round(time.Millisecond))
	_ = watch.Process.Signal(syscall.SIGINT)
	if err := watch.Wait(); err != nil {
		t.Fatalf("--watch on SIGINT: %v, stderr %q", err, stderr.String())
	}
}

// writeRecord writes rec as the Lease ns/name through the lease backend.
func writeRecord(t *testing.T, ns, name string, rec backend.Record) {
	t.Helper()
	client, err := kubeclient.New(sidecartest.Kube(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lease.New(lease.Options{Client: client, Namespace: ns, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if _, err := b.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// status runs a status command line with extra variables and returns its
// stdout, failing t unless it exits 0.
func status(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v, stderr %q", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// statusFails runs a command line that must fail and returns its exit
// status and stderr.
func statusFails(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run()
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// statusJSON runs status -o json and decodes its elections.
func statusJSON(t *testing.T, bin string, args ...string) []statusRow {
	t.Helper()
	var list struct {
		Elections []statusRow `json:"elections"`
	}
	out := status(t, bin, nil, args...)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o json: %v in %q", err, out)
	}
	return list.Elections
}

// contextNamespace writes a copy of the kubeconfig kc whose current
// context names namespace ns.
func contextNamespace(t *testing.T, kc, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// awaitRow waits for a row of --watch that match accepts.
func awaitRow(t *testing.T, seen <-chan statusRow, within time.Duration, match func(statusRow) bool) statusRow {
	t.Helper()
	deadline := time.After(within)
	var got []statusRow
	for {
		select {
		case r, ok := <-seen:
			if !ok {
				t.Fatalf("--watch ended; rows %+v", got)
			}
			if match(r) {
				return r
			}
			got = append(got, r)
		case <-deadline:
			t.Fatalf("no such row from --watch within %v; rows %+v", within, got)
		}
	}
}

// squeeze is s with each run of spaces made one.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
}
