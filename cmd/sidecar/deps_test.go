package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestBinaryLinksOnlyTheAPIGroupsItUses lists the packages the sidecar
// binary is built from: of k8s.io/api only the three groups it sends, no
// client-go clientset (which registers every group at start-up), and none
// of the test and benchmark tools.
func TestBinaryLinksOnlyTheAPIGroupsItUses(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var apis []string
	for _, pkg := range strings.Fields(string(out)) {
		if group, ok := strings.CutPrefix(pkg, "k8s.io/api/"); ok {
			apis = append(apis, group)
		}
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/tools/events",
			"sigs.k8s.io/controller-runtime", "gonum.org/", "github.com/leader-sidecar/leader-sidecar/internal/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the sidecar links %s", pkg)
			}
		}
	}
	slices.Sort(apis)
	if want := []string{"coordination/v1", "core/v1", "events/v1"}; !slices.Equal(apis, want) {
		t.Errorf("API groups linked: %v, want %v", apis, want)
	}
}
