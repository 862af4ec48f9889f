package injecttest

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LeaseUpdateAllowed asks the API server whether serviceAccount of ns may
// update Lease lease there, as the injector's admission policy asks it
// before a labelled Pod is admitted: a test that has just created a Role
// waits for it, as the authorizer learns of RBAC objects from a watch.
// It returns the answer and its reason.
func LeaseUpdateAllowed(ctx context.Context, client kubernetes.Interface, ns, serviceAccount, lease string) (bool, string, error) {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":" + serviceAccount,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: "coordination.k8s.io", Resource: "leases",
			Name: lease, Verb: "update"}}}
	got, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return got.Status.Allowed, got.Status.Reason, nil
}
