package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every file's time, so that layers are reproducible.
var epoch = time.Unix(0, 0).UTC()

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// entry is one file or directory of a layer.
type entry struct {
	name     string // without a leading slash
	mode     int64
	uid, gid int
	dir      bool
	link     string // a symbolic link's target
	data     []byte
}

// baseLayer is the layer every image starts from.
func baseLayer(caCerts, zoneinfo string) (v1.Layer, error) {
	certs, err := os.ReadFile(caCerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	entries := []entry{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: "usr", mode: 0o755, dir: true},
		{name: "usr/share", mode: 0o755, dir: true},
	}
	err = filepath.WalkDir(zoneinfo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(zoneinfo, path)
		name := filepath.ToSlash(filepath.Join("usr/share/zoneinfo", rel))
		if d.IsDir() {
			entries = append(entries, entry{name: name, mode: 0o755, dir: true})
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Debian links zones to others by relative links; keep those,
			// and copy what an absolute link points to.
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				entries = append(entries, entry{name: name, mode: 0o777, link: target})
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, entry{name: name, mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tzdata: %w", err)
	}
	return layerOf(entries)
}

// binaryLayer holds one executable at /<name>.
func binaryLayer(path, name string) (v1.Layer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return layerOf([]entry{{name: name, mode: 0o755, data: data}})
}

// layerOf writes entries, sorted by name, into an uncompressed tar and makes
// a gzip-compressed OCI layer of it.
func layerOf(entries []entry) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: epoch, Format: tar.FormatPAX,
		}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
