package packaging

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// An OCI image layout archive read by hand, from the JSON the image spec
// defines (index.json, manifests, configs) and its blobs, each checked
// against its digest.

const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

func (p ociPlatform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *ociPlatform      `json:"platform"`
	// ArtifactType is for artifacts, not images (OCI 1.1).
	ArtifactType string `json:"artifactType"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	ociPlatform
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		Env          []string
		WorkingDir   string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ociArchive is the files of a layout archive.
type ociArchive struct {
	path  string
	files map[string][]byte
}

func readOCIArchive(t *testing.T, path string) *ociArchive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &ociArchive{path: path, files: map[string][]byte{}}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a.files[h.Name] = data
	}
	if layout := string(a.files["oci-layout"]); !strings.Contains(layout, `"imageLayoutVersion"`) {
		t.Fatalf("%s: no oci-layout file (%q): not an OCI image layout", path, layout)
	}
	return a
}

// index is the layout's index.json.
func (a *ociArchive) index(t *testing.T) ociIndex {
	t.Helper()
	var idx ociIndex
	a.decode(t, "index.json", a.files["index.json"], &idx)
	return idx
}

// blob is the content of a descriptor, checked against its digest and size.
func (a *ociArchive) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("%s: digest %q is not sha256", a.path, d.Digest)
	}
	data, ok := a.files["blobs/sha256/"+hexDigest]
	if !ok {
		t.Fatalf("%s: blob %s is missing", a.path, d.Digest)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("%s: blob %s does not match its digest or size %d", a.path, d.Digest, d.Size)
	}
	return data
}

func (a *ociArchive) decode(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %s: %v", a.path, what, err)
	}
}

// ociImage is one platform's image: its config and its files, layers
// applied in order.
type ociImage struct {
	config ociConfig
	files  map[string]*ociFile // path without a leading slash; directories end in /
}

type ociFile struct {
	mode     int64
	uid, gid int
	link     string
	data     []byte
}

// image reads the image of manifest descriptor d: the config, and every
// layer unpacked, each checked against the config's diff_ids.
func (a *ociArchive) image(t *testing.T, d ociDescriptor) ociImage {
	t.Helper()
	if d.MediaType != ociManifestType {
		t.Fatalf("%s: manifest %s has media type %s, want %s", a.path, d.Digest, d.MediaType, ociManifestType)
	}
	var m ociManifest
	a.decode(t, "manifest "+d.Digest, a.blob(t, d), &m)
	if m.Config.MediaType != ociConfigType {
		t.Fatalf("%s: config media type %s, want %s", a.path, m.Config.MediaType, ociConfigType)
	}
	img := ociImage{files: map[string]*ociFile{}}
	a.decode(t, "config "+m.Config.Digest, a.blob(t, m.Config), &img.config)
	if len(img.config.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("%s: %d layers but %d diff_ids", a.path, len(m.Layers), len(img.config.RootFS.DiffIDs))
	}
	for i, l := range m.Layers {
		if l.MediaType != ociLayerType {
			t.Fatalf("%s: layer media type %s, want %s", a.path, l.MediaType, ociLayerType)
		}
		zr, err := gzip.NewReader(bytes.NewReader(a.blob(t, l)))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != img.config.RootFS.DiffIDs[i] {
			t.Fatalf("%s: layer %d does not match diff_id %s", a.path, i, img.config.RootFS.DiffIDs[i])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", l.Digest, err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			img.files[strings.TrimPrefix(h.Name, "/")] = &ociFile{mode: h.Mode, uid: h.Uid, gid: h.Gid, link: h.Linkname, data: data}
		}
	}
	return img
}

// platforms is the platform list of an image index, in order.
func platforms(idx ociIndex) []string {
	var out []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			out = append(out, "(none)")
			continue
		}
		out = append(out, m.Platform.String())
	}
	return out
}

func (i ociImage) file(t *testing.T, path string) *ociFile {
	t.Helper()
	f, ok := i.files[path]
	if !ok {
		t.Fatalf("the %s image has no /%s", i.config.ociPlatform, path)
	}
	return f
}

func (f *ociFile) String() string { return fmt.Sprintf("mode %o uid %d gid %d", f.mode, f.uid, f.gid) }
