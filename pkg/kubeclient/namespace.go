package kubeclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ServiceAccountNamespaceFile is where the kubelet puts the Pod's namespace
// when it mounts a service-account token.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// NamespaceEnv is the environment variable ResolveNamespace reads. A Pod
// sets it from the downward API:
//
//	env:
//	- name: POD_NAMESPACE
//	  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
const NamespaceEnv = "POD_NAMESPACE"

// ResolveNamespace returns the namespace of the Lease, from the first of
// these that is set:
//
//  1. flagValue (the --namespace flag),
//  2. getenv("POD_NAMESPACE"),
//  3. the contents of saNamespaceFile, or of ServiceAccountNamespaceFile
//     when saNamespaceFile is "".
//
// If none is, the error says to set --namespace or POD_NAMESPACE. A value
// that is not a valid namespace name is an error naming where it came from.
// getenv may be nil (no environment).
func ResolveNamespace(flagValue string, getenv func(string) string, saNamespaceFile string) (string, error) {
	if flagValue != "" {
		return checkNamespace(flagValue, "--namespace")
	}
	if getenv != nil {
		if v := getenv(NamespaceEnv); v != "" {
			return checkNamespace(v, NamespaceEnv)
		}
	}
	if saNamespaceFile == "" {
		saNamespaceFile = ServiceAccountNamespaceFile
	}
	data, err := os.ReadFile(saNamespaceFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no namespace for the Lease: set --namespace or %s (not running in a Pod with a service account: %s does not exist)",
			NamespaceEnv, saNamespaceFile)
	case err != nil:
		return "", fmt.Errorf("no namespace for the Lease: set --namespace or %s (reading %s: %w)", NamespaceEnv, saNamespaceFile, err)
	}
	ns := strings.TrimSpace(string(data))
	if ns == "" {
		return "", fmt.Errorf("no namespace for the Lease: set --namespace or %s (%s is empty)", NamespaceEnv, saNamespaceFile)
	}
	return checkNamespace(ns, saNamespaceFile)
}

// checkNamespace returns ns if it is a valid namespace name, else an error
// naming source.
func checkNamespace(ns, source string) (string, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", fmt.Errorf("namespace %q from %s is not a valid namespace name: %s", ns, source, strings.Join(errs, "; "))
	}
	return ns, nil
}
