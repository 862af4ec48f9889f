package main

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSpec is one image to write: its reference and its binary, whose
// path may hold {os} and {arch}, replaced for each platform.
type imageSpec struct {
	ref, binary, entrypoint string
}

// config is what every image's configuration shares, beyond the binary.
type config struct {
	exposed map[string]struct{} // "4040/tcp"
	labels  map[string]string
}

// binaryFor is the path of spec's binary for platform p.
func (s imageSpec) binaryFor(p v1.Platform) string {
	return strings.NewReplacer("{os}", p.OS, "{arch}", p.Architecture).Replace(s.binary)
}

// image builds the image of spec for platform p on base.
func (s imageSpec) image(base v1.Layer, p v1.Platform, c config) (v1.Image, error) {
	bin, err := binaryLayer(s.binaryFor(p), strings.TrimPrefix(s.entrypoint, "/"))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, bin)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{s.entrypoint},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		User:         "65532:65532",
		WorkingDir:   "/",
		ExposedPorts: c.exposed,
		Labels:       c.labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return plainImage{img}, nil
}

// plainImage is an image whose descriptor in an index carries no
// artifactType. go-containerregistry puts the config's media type there
// (OCI 1.1); tools that predate that field drop it when they copy an index,
// which changes the index's digest (skopeo 1.9 then cannot copy with
// --preserve-digests). Images built by docker buildx have none either.
type plainImage struct{ v1.Image }

// ArtifactType is empty: an image, not an artifact.
func (plainImage) ArtifactType() (string, error) { return "", nil }

// index builds an OCI image index of spec with one image per platform, in
// the order given.
func (s imageSpec) index(base v1.Layer, platforms []v1.Platform, c config) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := s.image(base, p, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}},
		})
	}
	return idx, nil
}
