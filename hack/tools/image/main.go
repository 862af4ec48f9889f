// Command image assembles container images without a registry or a
// container engine, and writes them as one OCI image layout archive that
// `ctr images import`, skopeo (oci-archive:) and crane load, each image
// named by its reference.
//
//	image -o images.tar \
//	  -image ghcr.io/leader-sidecar/leader-sidecar:v0.1.0=bin/sidecar \
//	  -image registry.k8s.io/pause:3.10=bin/pause
//
//	image -o leader-sidecar.oci.tar -platforms linux/amd64,linux/arm64 \
//	  -expose 4040/tcp -expose 8081/tcp \
//	  -image ghcr.io/leader-sidecar/leader-sidecar:v0.1.0=bin/linux-{arch}/sidecar
//
// Every image is the same base layer plus one layer holding its binary at
// /<binary's file name>, which is the entrypoint. The base has what
// distroless static nonroot has: CA certificates, /etc/passwd and
// /etc/group with root and nonroot (uid and gid 65532), tzdata, /tmp and
// /home/nonroot. It is copied from this machine's files (-ca-certs,
// -zoneinfo). Images run as 65532:65532.
//
// With one platform (the default is linux and this machine's architecture)
// each image is one manifest. With several, each is an OCI image index with
// one manifest per platform, in the order given, and the binary's path
// names the platform with {os} and {arch}.
//
// The output depends only on the inputs: fixed file times and owners,
// sorted entries, a fixed creation time, so building twice from the same
// binaries and base files gives the same digests.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type listFlag []string

func (f *listFlag) String() string     { return strings.Join(*f, ",") }
func (f *listFlag) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	log.SetFlags(0)
	log.SetPrefix("image: ")
	var images, exposed, labels listFlag
	out := flag.String("o", "", "the OCI layout archive to write")
	caCerts := flag.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle for the base")
	zoneinfo := flag.String("zoneinfo", "/usr/share/zoneinfo", "tzdata directory for the base")
	platformList := flag.String("platforms", "linux/"+runtime.GOARCH, "comma-separated OS/ARCH[/VARIANT] of the images")
	flag.Var(&images, "image", "REFERENCE=BINARY, repeated; BINARY may hold {os} and {arch}")
	flag.Var(&exposed, "expose", "PORT/PROTOCOL the images expose (4040/tcp), repeated")
	flag.Var(&labels, "label", "KEY=VALUE label of the images, repeated")
	flag.Parse()

	platforms, specs, c, err := parseArgs(*out, *platformList, images, exposed, labels, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		flag.Usage()
		os.Exit(2)
	}
	base, err := baseLayer(*caCerts, *zoneinfo)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeArchive(*out, base, platforms, c, specs); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "image: wrote %d images for %s to %s\n", len(specs), *platformList, *out)
}

// parseArgs checks the flags and returns what they ask for, or an error
// naming the flag that is wrong.
func parseArgs(out, platformList string, images, exposed, labels, rest []string) ([]v1.Platform, []imageSpec, config, error) {
	c := config{}
	if len(rest) > 0 {
		return nil, nil, c, fmt.Errorf("unexpected arguments %q: every input is a flag", rest)
	}
	if out == "" {
		return nil, nil, c, fmt.Errorf("-o is required: the archive to write")
	}
	if len(images) == 0 {
		return nil, nil, c, fmt.Errorf("-image is required: at least one REFERENCE=BINARY")
	}
	var platforms []v1.Platform
	seen := map[string]bool{}
	for _, s := range strings.Split(platformList, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(s))
		if err != nil || p.OS != "linux" || p.Architecture == "" || strings.Contains(s, ":") {
			return nil, nil, c, fmt.Errorf("-platforms %q: want linux/ARCH[/VARIANT], comma-separated", s)
		}
		if seen[p.String()] {
			return nil, nil, c, fmt.Errorf("-platforms: %s is given twice", p)
		}
		seen[p.String()] = true
		platforms = append(platforms, *p)
	}
	var specs []imageSpec
	for _, v := range images {
		ref, bin, ok := strings.Cut(v, "=")
		if !ok || ref == "" || bin == "" {
			return nil, nil, c, fmt.Errorf("-image %q: want REFERENCE=BINARY", v)
		}
		if len(platforms) > 1 && !strings.Contains(bin, "{arch}") {
			return nil, nil, c, fmt.Errorf("-image %q: with several -platforms the binary's path must hold {arch}", v)
		}
		specs = append(specs, imageSpec{ref: ref, binary: bin, entrypoint: "/" + filepath.Base(bin)})
	}
	for _, e := range exposed {
		port, proto, ok := strings.Cut(e, "/")
		if !ok || !isPort(port) || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			return nil, nil, c, fmt.Errorf("-expose %q: want PORT/tcp, PORT/udp or PORT/sctp", e)
		}
		if c.exposed == nil {
			c.exposed = map[string]struct{}{}
		}
		c.exposed[e] = struct{}{}
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, nil, c, fmt.Errorf("-label %q: want KEY=VALUE", l)
		}
		if c.labels == nil {
			c.labels = map[string]string{}
		}
		c.labels[k] = v
	}
	return platforms, specs, c, nil
}

// isPort reports whether s is a port number, 1 to 65535.
func isPort(s string) bool {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' || n > 65535 {
			return false
		}
		n = n*10 + int(r-'0')
	}
	return s != "" && s[0] != '0' && n >= 1 && n <= 65535
}
