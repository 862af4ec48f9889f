package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = ""

// currentVersion is the stamped version, else what the build recorded
// (versionOf).
func currentVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(info.Main.Version, info.Settings)
}

// versionOf is the version of a binary built without -X main.version: the
// module's version (go install ...@vX, or the pseudo-version go build
// derives from the checkout's commit, v0.0.0-<time>-<commit>+dirty), else,
// where the module has none (-buildvcs=false, or an older Go), "devel"
// with the commit go build recorded, if any (its first 12 hex digits, and
// "-dirty" for uncommitted changes).
func versionOf(module string, settings []debug.BuildSetting) string {
	if module != "" && module != "(devel)" {
		return module
	}
	var revision, modified string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "devel"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return "devel (" + revision + ")"
}

const versionUsage = `Usage: sidecar version

Prints the version of the binary and exits, as sidecar --version.
`

// runVersion is "sidecar version".
func runVersion(_ context.Context, p process, args []string) int {
	fs := newFlagSet("sidecar version")
	err := parseArgs(fs, args, versionUsage, p.stdout)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(p.stderr, "sidecar version: %v\n", err)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(p.stderr, "sidecar version: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	return printVersion(p)
}

func printVersion(p process) int {
	fmt.Fprintf(p.stdout, "sidecar %s\n", currentVersion())
	return 0
}
