package sidecartest

import (
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// twoVolumesKeys is a Deployment as a chart renders it when a library
// helper opens a `volumes:` key of its own after the chart's: the user's
// Secret volume first, the library's token volume second.
const twoVolumesKeys = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
    spec:
      containers:
        - name: app
          image: my/app
      volumes:
        - name: foo
          secret:
            secretName: mysecret
      volumes:
        - name: leader-sidecar-token
          emptyDir: {}
`

// A manifest with a key twice is refused, naming the key: a lenient
// decoder keeps the last `volumes:` and the user's volume is gone without
// a word.
func TestDecodeManifestsRefusesDuplicateKeys(t *testing.T) {
	lenient, err := utilyaml.ToJSON([]byte(twoVolumesKeys))
	if err != nil || strings.Contains(string(lenient), `"foo"`) {
		t.Fatalf("a lenient decoder kept the first volumes key (%v): %s", err, lenient)
	}
	_, err = decodeManifests(twoVolumesKeys)
	if err == nil || !strings.Contains(err.Error(), `"volumes" already set`) {
		t.Fatalf("two volumes keys decoded: %v", err)
	}
	r, err := decodeManifests(strings.Replace(twoVolumesKeys, "      volumes:\n        - name: leader", "        - name: leader", 1))
	if err != nil || len(r.Objects) != 1 {
		t.Fatalf("one volumes key: %v", err)
	}
}
