package process

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// The commands and answers that docs/ shows, run as they are written
// against the real binary.

// docBlocks returns the shell blocks (```sh) of the page docs/name.
func docBlocks(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(sidecartest.RepoPath(t, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("docs/%s shows no sh block", name)
	}
	return blocks
}

// docLines are the commands of blocks that start with prefix.
func docLines(blocks []string, prefix string) []string {
	var lines []string
	for _, b := range blocks {
		for line := range strings.SplitSeq(b, "\n") {
			if strings.HasPrefix(line, prefix) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// Both commands of docs/lock.md run as written, with /var/lib/jobs a
// directory of the test's and the page's scripts ones that record their
// arguments: each lock leads on a fresh file, runs its script with the
// arguments given, and exits 0.
func TestLockPageCommands(t *testing.T) {
	t.Parallel()
	lines := docLines(docBlocks(t, "lock.md"), "sidecar lock ")
	if len(lines) != 2 {
		t.Fatalf("docs/lock.md shows %d sidecar lock commands, want 2: %q", len(lines), lines)
	}
	for _, line := range lines {
		work, jobs := t.TempDir(), t.TempDir()
		script := regexp.MustCompile(`-- \./(\S+)`).FindStringSubmatch(line)
		if script == nil {
			t.Fatalf("%q runs no ./script", line)
		}
		ran := filepath.Join(work, "ran")
		body := "#!/bin/sh\necho \"$LEADER_SIDECAR_TOKEN $*\" >" + ran + "\n"
		if err := os.WriteFile(filepath.Join(work, script[1]), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		command := sidecartest.Binary(t) + strings.TrimPrefix(line, "sidecar")
		command = strings.ReplaceAll(command, "/var/lib/jobs/", jobs+"/")
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		got, err := os.ReadFile(ran)
		if err != nil {
			t.Fatalf("%s: the script did not run: %v", line, err)
		}
		args := strings.TrimSpace(line[strings.Index(line, script[0])+len(script[0]):])
		if want := strings.TrimSpace("1 " + args); strings.TrimSpace(string(got)) != want {
			t.Fatalf("%s: the script got %q, want token and arguments %q", line, got, want)
		}
	}
}

// The answers docs/http-api.md shows have the fields, and the framing, of a
// real sidecar's.
func TestHTTPAPIPageAnswers(t *testing.T) {
	t.Parallel()
	blocks := docBlocks(t, "http-api.md")
	shown := map[string]string{} // command -> the answer's first line
	for _, b := range blocks {
		lines := strings.Split(strings.TrimSpace(b), "\n")
		if len(lines) > 1 && strings.HasPrefix(lines[0], "$ curl") {
			shown[strings.Fields(lines[0])[len(strings.Fields(lines[0]))-1]] = lines[1]
		}
	}
	leaderShown, watchShown := shown["localhost:4040/leader"], shown["localhost:4040/leader/watch"]
	if leaderShown == "" || watchShown == "" {
		t.Fatalf("docs/http-api.md shows answers for %q, want /leader and /leader/watch", slices.Sorted(maps.Keys(shown)))
	}
	var shownFields map[string]any
	if err := json.Unmarshal([]byte(leaderShown), &shownFields); err != nil {
		t.Fatalf("the page's /leader answer is not JSON: %v\n%s", err, leaderShown)
	}

	s := sidecartest.Start(t, sidecartest.DBPath(t))
	sidecartest.AwaitLeader(t, []*sidecartest.Sidecar{s}, 10*time.Second)
	resp, err := http.Get("http://" + s.Addr() + "/leader")
	if err != nil {
		t.Fatal(err)
	}
	var realFields map[string]any
	err = json.NewDecoder(resp.Body).Decode(&realFields)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := slices.Sorted(maps.Keys(shownFields)), slices.Sorted(maps.Keys(realFields)); !slices.Equal(a, b) {
		t.Fatalf("the page's /leader answer has the fields %q, a sidecar's %q", a, b)
	}
	for k, v := range shownFields {
		if v != nil && realFields[k] != nil && typeName(v) != typeName(realFields[k]) {
			t.Errorf("field %q: the page shows a %s, a sidecar answers a %s", k, typeName(v), typeName(realFields[k]))
		}
	}

	resp, err = http.Get("http://" + s.Addr() + "/leader/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if prefix := watchShown[:strings.Index(watchShown, "{")]; !strings.HasPrefix(first, prefix+"{") {
		t.Fatalf("the page's watch event starts %q, a sidecar's is %q", prefix, first)
	}
}

func typeName(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	default:
		return "object"
	}
}

// The SQLite statement docs/backends.md gives for raising the stored token
// does what the page says: run on the file of a leading sidecar, the
// leader's next term has the token one above the value set.
func TestBackendsPageTokenRaise(t *testing.T) {
	t.Parallel()
	lines := docLines(docBlocks(t, "backends.md"), "sqlite3 ")
	if len(lines) != 1 {
		t.Fatalf("docs/backends.md shows %d sqlite3 commands, want 1: %q", len(lines), lines)
	}
	m := regexp.MustCompile(`^sqlite3 (\S+) "(.*)"$`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("cannot read %q as sqlite3 FILE \"STATEMENT\"", lines[0])
	}
	set := regexp.MustCompile(`transitions = (\d+)`).FindStringSubmatch(m[2])
	if set == nil {
		t.Fatalf("%q sets no transitions", m[2])
	}
	// The page's file name is the sidecar's default path: the test runs the
	// sidecar in a directory of its own with its defaults.
	dir := t.TempDir()
	cmd := exec.Command(sidecartest.Binary(t), append([]string{"--http-address", "127.0.0.1:0", "--log-format", "json", "--log-level", "info"},
		sidecartest.TimingArgs()...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	s := sidecartest.Track(t, cmd)
	s.WaitServing()
	all := []*sidecartest.Sidecar{s}
	sidecartest.AwaitToken(t, all, 1, 10*time.Second)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, m[1])+"?mode=rw&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(m[2])
	if err != nil {
		t.Fatalf("%s: %v", m[2], err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows, want the election's one", m[2], n)
	}
	var want int64
	for _, c := range set[1] {
		want = want*10 + int64(c-'0')
	}
	sidecartest.AwaitToken(t, all, want+1, 10*sidecartest.LeaseDuration)
}

// Every file or folder of the repository that the README, docs/, the
// charts and the package docs name exists, and every Go function a chart
// template names as the source of a rule it mirrors ("As Type.method
// (cmd/sidecar/file.go)") is defined in the file named: a renamed or moved
// file cannot leave a page pointing at nothing.
func TestCitedFilesExist(t *testing.T) {
	t.Parallel()
	root := sidecartest.RepoPath(t)
	var texts []string
	for _, top := range []string{"README.md", "docs", "charts", "cmd", "pkg", "e2e", "internal", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch ext := filepath.Ext(path); {
			case ext == ".md", ext == ".tpl", ext == ".yaml" && strings.Contains(path, "/charts/"), filepath.Base(path) == "doc.go":
				texts = append(texts, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	repoPath := regexp.MustCompile(`(?:^|[\s(\x60"'])((?:cmd|pkg|e2e|internal|hack|charts|docs|examples)/[\w./*-]*[\w*-])`)
	link := regexp.MustCompile(`\]\((\.\.?/[^)#\s]+)`)
	mirror := regexp.MustCompile(`As (\w+)\.(\w+) \((cmd/[\w/]+\.go)\)`)
	exists := func(p string) bool { // a path, or a pattern that matches one
		matches, err := filepath.Glob(p)
		return err == nil && len(matches) > 0
	}
	cited := 0
	for _, file := range texts {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, m := range repoPath.FindAllStringSubmatch(string(raw), -1) {
			p := strings.TrimSuffix(m[1], ".")
			if strings.Contains(p, "vX.Y.Z") { // a release tag's form, not a path
				continue
			}
			cited++
			if !exists(filepath.Join(root, p)) {
				t.Errorf("%s names %s, which the repository does not have", rel, p)
			}
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			cited++
			if !exists(filepath.Join(filepath.Dir(file), m[1])) {
				t.Errorf("%s links to %s, which the repository does not have", rel, m[1])
			}
		}
		for _, m := range mirror.FindAllStringSubmatch(string(raw), -1) {
			cited++
			src, err := os.ReadFile(filepath.Join(root, m[3]))
			def := regexp.MustCompile(`func \(\w+ \*?` + m[1] + `\) ` + m[2] + `\(`)
			if err != nil || !def.Match(src) {
				t.Errorf("%s mirrors %s.%s of %s, which is not defined there", rel, m[1], m[2], m[3])
			}
		}
	}
	t.Logf("%d files, %d citations", len(texts), cited)
}
