package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeArchive writes every image into an OCI image layout and packs it as
// a tar archive at out. With one platform each image is a manifest in the
// layout's index; with several, an image index with one manifest per
// platform. Each entry of the layout's index is annotated with the image's
// full reference (containerd's io.containerd.image.name) and its tag
// (org.opencontainers.image.ref.name), as `ctr images import`, skopeo's
// oci-archive:FILE:TAG and crane read them.
func writeArchive(out string, base v1.Layer, platforms []v1.Platform, c config, specs []imageSpec) error {
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
		annotations := layout.WithAnnotations(map[string]string{
			"io.containerd.image.name":          fullName(ref),
			"org.opencontainers.image.ref.name": ref.Identifier(),
		})
		if len(platforms) == 1 {
			img, err := s.image(base, platforms[0], c)
			if err == nil {
				err = p.AppendImage(img, layout.WithPlatform(platforms[0]), annotations)
			}
			if err != nil {
				return fmt.Errorf("image %s: %w", s.ref, err)
			}
			continue
		}
		idx, err := s.index(base, platforms, c)
		if err == nil {
			err = p.AppendIndex(idx, annotations)
		}
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

// tarDir packs the files under dir, with paths relative to it, into out,
// in lexical order with fixed times, owners and modes, so that the same
// layout always gives the same archive.
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
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(h); err != nil {
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
