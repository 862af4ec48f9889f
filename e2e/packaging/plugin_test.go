package packaging

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// krewPlugin is the part of a krew plugin manifest
// (krew.googlecontainertools.github.com/v1alpha2 Plugin) that krew reads
// to install a plugin.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// checkPluginManifest checks the release's plugins/leader.yaml in dir: a
// krew Plugin named leader at the release's version, with one platform
// per binary archive, selected by its OS and architecture, whose uri ends
// in the archive's name and whose sha256 is the archive's; the files it
// copies are in the archive, and the binary krew links is the sidecar
// named kubectl-leader, with the LICENSE beside it.
func checkPluginManifest(t *testing.T, dir, version string) {
	t.Helper()
	var p krewPlugin
	if err := yaml.UnmarshalStrict(sidecartest.MustRead(t, filepath.Join(dir, "plugins", "leader.yaml")), &p); err != nil {
		t.Fatalf("plugins/leader.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "leader" {
		t.Errorf("plugins/leader.yaml is a %s %s named %q, want a krew.googlecontainertools.github.com/v1alpha2 Plugin named leader", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != version || p.Spec.Homepage == "" || p.Spec.ShortDescription == "" || p.Spec.Description == "" {
		t.Errorf("plugins/leader.yaml: version %q, homepage %q, shortDescription %q, description %q; want %s and all three",
			p.Spec.Version, p.Spec.Homepage, p.Spec.ShortDescription, p.Spec.Description, version)
	}
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		osArch := pl.Selector.MatchLabels["os"] + "-" + pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, osArch)
		name := "leader-sidecar-" + version + "-" + osArch
		archive := name + ".tar.gz"
		if len(pl.Selector.MatchLabels) != 2 {
			t.Errorf("%s: selects on %v, want os and arch", osArch, pl.Selector.MatchLabels)
		}
		if !strings.HasPrefix(pl.URI, "https://") || !strings.HasSuffix(pl.URI, "/"+version+"/"+archive) {
			t.Errorf("%s: uri %q, want an https:// URL of the release's %s", osArch, pl.URI, archive)
		}
		raw := sidecartest.MustRead(t, filepath.Join(dir, archive))
		if sum := sha256.Sum256(raw); pl.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: sha256 %q, the archive hashes to %x", osArch, pl.SHA256, sum)
		}
		files := untgz(t, filepath.Join(dir, archive))
		copies := map[string]string{}
		for _, f := range pl.Files {
			copies[f.From] = f.To
			if _, ok := files[f.From]; !ok {
				t.Errorf("%s: copies %s, which %s does not hold", osArch, f.From, archive)
			}
		}
		if copies[name+"/sidecar"] != "kubectl-leader" || copies[name+"/LICENSE"] != "." || pl.Bin != "kubectl-leader" {
			t.Errorf("%s: files %v and bin %q, want %s/sidecar copied to kubectl-leader, the LICENSE to ., and bin kubectl-leader",
				osArch, pl.Files, pl.Bin, name)
		}
	}
	slices.Sort(platforms)
	if want := []string{"darwin-amd64", "darwin-arm64", "linux-amd64", "linux-arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("plugins/leader.yaml has the platforms %q, want %q", platforms, want)
	}
}
