package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSpec is one image to write: its reference and its binary.
type imageSpec struct {
	ref, binary, entrypoint string
}

// image builds the image of spec on base.
func (s imageSpec) image(base v1.Layer, arch string) (v1.Image, error) {
	bin, err := binaryLayer(s.binary, strings.TrimPrefix(s.entrypoint, "/"))
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
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: []string{s.entrypoint},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		User:       "65532:65532",
		WorkingDir: "/",
	}
	return mutate.ConfigFile(img, cf)
}

// writeArchive writes every image into an OCI image layout and packs it as
// a tar archive at out. Each manifest in the index is annotated with the
// image's full reference (containerd's io.containerd.image.name) and its tag
// (org.opencontainers.image.ref.name), as `ctr images import` reads them.
func writeArchive(out string, base v1.Layer, arch string, specs []imageSpec) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, s := range specs {
		ref, err := name.ParseReference(s.ref, name.WithDefaultTag("latest"))
		if err != nil {
			return fmt.Errorf("reference %q: %w", s.ref, err)
		}
		img, err := s.image(base, arch)
		if err != nil {
			return fmt.Errorf("image %s: %w", s.ref, err)
		}
		err = p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
			layout.WithAnnotations(map[string]string{
				"io.containerd.image.name":          fullName(ref),
				"org.opencontainers.image.ref.name": ref.Identifier(),
			}))
		if err != nil {
			return fmt.Errorf("image %s: %w", s.ref, err)
		}
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// fullName is ref as containerd and the kubelet spell it: Docker Hub is
// docker.io, as in docker.io/library/leader-sidecar:v0.1.0.
func fullName(ref name.Reference) string {
	repo := ref.Context()
	registry := repo.RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	return registry + "/" + repo.RepositoryStr() + sep + ref.Identifier()
}

// tarDir packs the files under dir, with paths relative to it, into out.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), epoch, 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil || d.IsDir() {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
