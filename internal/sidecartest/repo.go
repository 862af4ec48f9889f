package sidecartest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// module is the repository's Go module.
const module = "github.com/leader-sidecar/leader-sidecar"

// repoRoot is the repository's top directory: the nearest directory at or
// above the working directory (a test's package directory) whose go.mod
// declares the module.
var repoRoot = sync.OnceValues(func() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("sidecartest: no go.mod of %s at or above %s", module, wd)
		}
	}
})

func declaresModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.TrimSpace(name) == module
		}
	}
	return false
}

// RepoPath is the path of elem (such as "charts" or "LICENSE") in the
// repository, from any directory of it.
func RepoPath(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// MustRead is the content of the file at path; it fails t if it cannot be
// read.
func MustRead(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
