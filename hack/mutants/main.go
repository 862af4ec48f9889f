// Command mutants seeds known bugs into a copy of the repository, one at a
// time, and runs the check meant to catch each (make mutants):
//
//	go run ./hack/mutants                  # every mutant
//	go run ./hack/mutants -list            # the catalogue
//	go run ./hack/mutants -only sqlite-update-ignores-version,shard-cap-ignored
//
// A check that passes on a broken build proves little; one that fails on
// it proves it can fail. So every check runs first on the unmodified copy
// and must pass there (running at least one test or schedule); then, for
// each mutant, its one line is replaced, its check runs, and the line is
// put back. Each mutant prints "caught by <check> after N schedules (first
// catching seed S)" or "after N tests (first failing T)", or "NOT caught";
// a mutant not caught, a check that fails on the real code, a catalogue
// line that is not found exactly once, a mutant that does not compile, or
// a check that does not build the mutated package (so could not catch it
// whatever it ran) fails the run (exit 1). A table of the results ends
// the output, for docs/development.md.
//
// # The catalogue, beside the code
//
// Each package with seeded bugs has a file mutants.txt next to its
// source, naming files of that directory (the format is in catalogue.go):
// whoever edits a line a mutant names sees the catalogue in the same
// directory listing, and the runner fails while an entry's line is gone
// or doubled, so the catalogue cannot rot quietly. A single file under
// hack/ would be out of sight of those edits; a build tag per mutant
// would put dead branches into the product's source.
//
// # The copy
//
// The tracked and untracked, not ignored, files of the working tree are
// copied once into a temporary directory, so the working tree is never
// touched and uncommitted changes are tested as they are. Mutants run one
// after another in that copy, each line restored before the next; checks
// build with -trimpath (and CGO_ENABLED=0 but under -race, as make vet),
// so that every package a mutant does not touch comes from the shared
// build cache. Checks that need envtest's kube-apiserver get
// KUBEBUILDER_ASSETS from hack/envtest-binaries.sh unless it is set.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "print the catalogue and exit")
	only := fs.String("only", "", "comma-separated ids: run only these mutants")
	timeout := fs.Duration("timeout", 10*time.Minute, "the longest one check may run")
	keep := fs.Bool("keep", false, "keep the copy of the repository (its path is printed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mutants: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "mutants: -timeout must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, files, err := repository()
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 1
	}
	mutants, err := catalogue(root, files)
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 1
	}
	if *only != "" {
		mutants, err = selected(mutants, strings.Split(*only, ","))
		if err != nil {
			fmt.Fprintf(stderr, "mutants: -only: %v\n", err)
			return 2
		}
	}
	// Every line is found before anything runs.
	sources := map[string][]byte{}
	lines := map[string]int{}
	for _, m := range mutants {
		src, ok := sources[m.file]
		if !ok {
			if src, err = os.ReadFile(filepath.Join(root, m.file)); err != nil {
				fmt.Fprintf(stderr, "mutants: %s: mutant %q: %v\n", m.at, m.id, err)
				return 1
			}
			sources[m.file] = src
		}
		if _, err := apply(m, src); err != nil {
			fmt.Fprintf(stderr, "mutants: %s: mutant %q: %v\n", m.at, m.id, err)
			return 1
		}
		lines[m.id] = lineOf(m, src)
	}
	if *list {
		for _, m := range mutants {
			fmt.Fprintf(stdout, "%s\t%s:%d\n\t%s\n\tcheck: %s\n", m.id, m.file, lines[m.id], m.breaks, m.check)
		}
		return 0
	}

	began := time.Now()
	dir, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 1
	}
	if *keep {
		fmt.Fprintf(stdout, "the copy: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := copyFiles(root, dir, files); err != nil {
		fmt.Fprintf(stderr, "mutants: copying the repository: %v\n", err)
		return 1
	}
	env, err := environment(ctx, root, mutants)
	if err != nil {
		fmt.Fprintf(stderr, "mutants: %v\n", err)
		return 1
	}
	r := runner{dir: dir, env: env, timeout: *timeout}
	fmt.Fprintf(stdout, "%d mutants in %d catalogues, %d checks; the copy of %s in %s\n",
		len(mutants), countLayers(mutants), len(distinctChecks(mutants)), root, dir)

	// Each check passes on the unmodified copy, else its catch means nothing.
	baselineFailed := false
	for _, c := range distinctChecks(mutants) {
		parsed, _ := parseCheck(c)
		o := r.run(ctx, parsed)
		switch {
		case o.broken != "" || o.failed:
			baselineFailed = true
			fmt.Fprintf(stdout, "FAILS on the unmodified tree: %s: %s, %v\n", c, describeFailure(parsed, o), o.took.Round(100*time.Millisecond))
			printTail(stdout, o.output)
		default:
			fmt.Fprintf(stdout, "passes on the unmodified tree: %s (%s, %v)\n", c, count(o.ran, unit(parsed)), o.took.Round(100*time.Millisecond))
		}
		if ctx.Err() != nil {
			return 1
		}
	}
	if baselineFailed {
		fmt.Fprintln(stdout, "a check fails on the unmodified tree: no mutant was run")
		return 1
	}

	// The packages each check builds: a check that does not build the
	// mutated file cannot catch its mutant, whatever it runs.
	builds := map[string]map[string]bool{}
	for _, c := range distinctChecks(mutants) {
		parsed, _ := parseCheck(c)
		if builds[c], err = r.dirs(ctx, parsed); err != nil {
			fmt.Fprintf(stderr, "mutants: %v\n", err)
			return 1
		}
	}
	var results []result
	failed := false
	for _, m := range mutants {
		parsed, _ := parseCheck(m.check)
		path := filepath.Join(dir, m.file)
		if !builds[m.check][filepath.Dir(path)] {
			o := outcome{broken: "it does not build " + filepath.Dir(m.file) + ", so it cannot catch the mutant"}
			results = append(results, result{mutant: m, line: lines[m.id], check: parsed, outcome: o})
			fmt.Fprintf(stdout, "%s (%s:%d): %s\n", m.id, m.file, lines[m.id], results[len(results)-1].verdict())
			failed = true
			continue
		}
		original := sources[m.file]
		mutated, _ := apply(m, original)
		if err := writeKeepingMode(path, mutated); err != nil {
			fmt.Fprintf(stderr, "mutants: %s: %v\n", m.id, err)
			return 1
		}
		o := r.run(ctx, parsed)
		if err := writeKeepingMode(path, original); err != nil {
			fmt.Fprintf(stderr, "mutants: restoring %s: %v\n", m.file, err)
			return 1
		}
		res := result{mutant: m, line: lines[m.id], check: parsed, outcome: o}
		results = append(results, res)
		fmt.Fprintf(stdout, "%s (%s:%d): %s, %v\n", m.id, m.file, lines[m.id], res.verdict(), o.took.Round(100*time.Millisecond))
		if !o.failed {
			failed = true
			printTail(stdout, o.output)
		}
		if ctx.Err() != nil {
			return 1
		}
	}
	fmt.Fprintln(stdout)
	writeTable(stdout, results)
	caught := 0
	for _, res := range results {
		if res.outcome.failed {
			caught++
		}
	}
	fmt.Fprintf(stdout, "\n%d of %d mutants caught; wall time %v\n", caught, len(results), time.Since(began).Round(time.Second))
	if failed {
		return 1
	}
	return 0
}

// result is one mutant's run.
type result struct {
	mutant
	line    int
	check   check
	outcome outcome
}

func (r result) verdict() string {
	o := r.outcome
	switch {
	case o.broken != "":
		return fmt.Sprintf("NOT caught: %s gave no answer (%s)", r.mutant.check, o.broken)
	case !o.failed:
		return fmt.Sprintf("NOT caught by %s (%s passed)", r.mutant.check, count(o.ran, unit(r.check)))
	case r.check.kind == "sim":
		return fmt.Sprintf("caught by %s after %s (first catching seed %d)", r.mutant.check, count(o.ran, "schedule"), o.seed)
	}
	return fmt.Sprintf("caught by %s after %s (first failing %s)", r.mutant.check, count(o.ran, "test"), o.test)
}

func describeFailure(c check, o outcome) string {
	switch {
	case o.broken != "":
		return o.broken
	case c.kind == "sim":
		return fmt.Sprintf("a violation at seed %d", o.seed)
	}
	return "test " + o.test + " failed"
}

func unit(c check) string {
	if c.kind == "sim" {
		return "schedule"
	}
	return "test"
}

// count is "1 test", "2 tests".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeTable prints the results as the Markdown table of
// docs/development.md.
func writeTable(w io.Writer, results []result) {
	fmt.Fprintln(w, "| mutant | where | what it breaks | caught by | after | first catching |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range results {
		o := r.outcome
		var after, first string
		switch {
		case !o.failed:
			after, first = "NOT caught", ""
		case r.check.kind == "sim":
			after, first = count(o.ran, "schedule"), fmt.Sprintf("seed %d", o.seed)
		default:
			after, first = count(o.ran, "test"), "`"+o.test+"`"
		}
		fmt.Fprintf(w, "| `%s` | `%s:%d` | %s | `%s` | %s | %s |\n", r.id, r.file, r.line, r.breaks, r.mutant.check, after, first)
	}
}

// printTail prints the last lines of a check's output, indented.
func printTail(w io.Writer, out []byte) {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	for _, l := range lines {
		fmt.Fprintf(w, "    %s\n", l)
	}
}

// repository returns the root of the git working tree around the current
// directory and its files that are tracked, or untracked and not ignored.
func repository() (string, []string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", nil, fmt.Errorf("not in a git working tree: %w", err)
	}
	root := strings.TrimSpace(string(out))
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return root, slices.Compact(files), nil
}

// catalogue reads every catalogue among files.
func catalogue(root string, files []string) ([]mutant, error) {
	var all []mutant
	for _, f := range files {
		if filepath.Base(f) != catalogueName {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		ms, err := parseCatalogue(f, data)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no %s in %s", catalogueName, root)
	}
	return all, checkIDs(all)
}

func selected(all []mutant, ids []string) ([]mutant, error) {
	var out []mutant
	for _, id := range ids {
		i := slices.IndexFunc(all, func(m mutant) bool { return m.id == id })
		if i < 0 {
			return nil, fmt.Errorf("no mutant %q (see -list)", id)
		}
		out = append(out, all[i])
	}
	return out, nil
}

func distinctChecks(ms []mutant) []string {
	var out []string
	for _, m := range ms {
		if !slices.Contains(out, m.check) {
			out = append(out, m.check)
		}
	}
	return out
}

func countLayers(ms []mutant) int {
	layers := map[string]bool{}
	for _, m := range ms {
		layers[m.layer] = true
	}
	return len(layers)
}

// environment is the checks' environment: this process's, with
// KUBEBUILDER_ASSETS when a test check's package needs envtest (imports
// internal/kubetest or controller-runtime's envtest, as the Makefile's
// UNIT_PKGS tells them apart) and it is not set.
func environment(ctx context.Context, root string, ms []mutant) ([]string, error) {
	env := os.Environ()
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		return env, nil
	}
	for _, c := range distinctChecks(ms) {
		parsed, _ := parseCheck(c)
		if parsed.kind != "test" {
			continue
		}
		modRoot, rel, err := moduleOf(root, parsed.pkg)
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, "go", "list", "-test", "-deps", rel)
		cmd.Dir = modRoot
		deps, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -test -deps %s: %w", parsed.pkg, err)
		}
		if !bytes.Contains(deps, []byte("/internal/kubetest\n")) && !bytes.Contains(deps, []byte("controller-runtime/pkg/envtest\n")) {
			continue
		}
		cmd = exec.CommandContext(ctx, filepath.Join(root, "hack", "envtest-binaries.sh"))
		cmd.Dir = root
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("hack/envtest-binaries.sh (for %s): %w", parsed.pkg, err)
		}
		fields := strings.Fields(string(out))
		if len(fields) == 0 {
			return nil, fmt.Errorf("hack/envtest-binaries.sh printed nothing")
		}
		return append(env, "KUBEBUILDER_ASSETS="+fields[len(fields)-1]), nil
	}
	return env, nil
}
