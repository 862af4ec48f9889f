package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
	"github.com/leader-sidecar/leader-sidecar/pkg/backend/backendtest"
	"github.com/leader-sidecar/leader-sidecar/pkg/kubeclient"
)

// impersonating returns a client acting as user, through kubeclient.NewClient.
func impersonating(t *testing.T, user string) *kubeclient.Client {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := kubeclient.NewClient(cfg, kubeclient.Options{Timeout: 10 * time.Second, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// grant gives user the verbs on Leases in ns.
func grant(t *testing.T, ns, user string, verbs ...string) {
	t.Helper()
	rbac := admin.RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}},
	}
	if _, err := rbac.Roles(ns).Create(ctxFor(t), role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}
	if _, err := rbac.RoleBindings(ns).Create(ctxFor(t), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the RoleBinding: %v", err)
	}
}

// assertForbidden fails unless err is a wrapped Forbidden whose message
// names the operation, the verb refused and the user.
func assertForbidden(t *testing.T, err error, ns, op, verb, user string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded for %s, want forbidden (is the API server's authorization mode RBAC?)", op, user)
	}
	if !apierrors.IsForbidden(err) || errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrConflict) {
		t.Fatalf("%s: got %v, want a Forbidden error and no sentinel", op, err)
	}
	msg := err.Error()
	for _, want := range []string{
		"lease " + ns + "/guarded: " + op + ":",
		"forbidden",
		`User "` + user + `" cannot ` + verb + ` resource "leases"`,
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: error %q does not contain %q", op, msg, want)
		}
	}
}

// TestForbiddenErrorsNameTheMissingPermission runs the backend as users
// without, then with partial, permissions. envtest's API server authorizes
// with RBAC, so each refusal names the verb the user lacks.
func TestForbiddenErrorsNameTheMissingPermission(t *testing.T) {
	ns := newNamespace(t)
	owner := newBackend(t, newClient(t), ns, "guarded")
	v, err := owner.Create(ctxFor(t), backendtest.SampleRecord("owner", 1))
	if err != nil {
		t.Fatalf("Create as admin: %v", err)
	}

	nobody := newBackend(t, impersonating(t, "nobody"), ns, "guarded")
	_, _, err = nobody.Get(ctxFor(t))
	assertForbidden(t, err, ns, "get", "get", "nobody")
	_, err = nobody.Create(ctxFor(t), backendtest.SampleRecord("nobody", 1))
	assertForbidden(t, err, ns, "create", "create", "nobody")
	_, err = nobody.Update(ctxFor(t), v, backendtest.SampleRecord("nobody", 2))
	assertForbidden(t, err, ns, "update", "get", "nobody") // it reads before writing

	grant(t, ns, "reader", "get", "list", "watch")
	reader := newBackend(t, impersonating(t, "reader"), ns, "guarded")
	var rec backend.Record
	deadline := time.Now().Add(10 * time.Second) // RBAC caches need a moment
	for {
		if rec, v, err = reader.Get(ctxFor(t)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Get with get permission: %v", err)
	}
	backendtest.AssertRecordEqual(t, rec, backendtest.SampleRecord("owner", 1))
	_, err = reader.Update(ctxFor(t), v, backendtest.SampleRecord("reader", 2))
	assertForbidden(t, err, ns, "update", "update", "reader")
}
