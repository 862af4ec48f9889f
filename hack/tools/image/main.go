// Command image assembles container images without a registry or a
// container engine, and writes them as one OCI image layout archive that
// `ctr images import` loads, each image named by its reference.
//
//	image -o images.tar \
//	  -image leader-sidecar:v0.1.0=bin/sidecar \
//	  -image registry.k8s.io/pause:3.10=bin/pause
//
// Every image is the same base layer plus one layer holding its binary at
// /<binary's file name>, which is the entrypoint. The base has what
// distroless static nonroot has: CA certificates, /etc/passwd and
// /etc/group with root and nonroot (uid and gid 65532), tzdata, /tmp and
// /home/nonroot. It is copied from this machine's files (-ca-certs,
// -zoneinfo). Images run as 65532:65532, except those named in -root (the
// pause image, whose user the runtime sets). Layers are reproducible: fixed
// file times and owners, sorted entries.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

type imageFlag []string

func (f *imageFlag) String() string     { return strings.Join(*f, ",") }
func (f *imageFlag) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	log.SetFlags(0)
	log.SetPrefix("image: ")
	var images imageFlag
	out := flag.String("o", "", "the OCI layout archive to write")
	caCerts := flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle for the base")
	zoneinfo := flag.String("zoneinfo", "/usr/share/zoneinfo", "tzdata directory for the base")
	arch := flag.String("arch", runtime.GOARCH, "architecture of the binaries")
	flag.Var(&images, "image", "REFERENCE=BINARY, repeated")
	flag.Parse()
	if *out == "" || len(images) == 0 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}

	base, err := baseLayer(*caCerts, *zoneinfo)
	if err != nil {
		log.Fatal(err)
	}
	var specs []imageSpec
	for _, v := range images {
		ref, bin, ok := strings.Cut(v, "=")
		if !ok || ref == "" || bin == "" {
			log.Fatalf("-image %q: want REFERENCE=BINARY", v)
		}
		specs = append(specs, imageSpec{ref: ref, binary: bin, entrypoint: "/" + filepath.Base(bin)})
	}
	if err := writeArchive(*out, base, *arch, specs); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "image: wrote %d images to %s\n", len(specs), *out)
}
