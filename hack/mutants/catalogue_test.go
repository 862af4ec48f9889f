package main

import (
	"strings"
	"testing"
)

const src = `package p

func f(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func g(a, b int) int {
	if a < b {
		return b
	}
	return a
}
`

func TestApplyReplacesTheOneLineKeepingItsIndentation(t *testing.T) {
	m := mutant{file: "p.go", from: "return a", to: "return b", after: "func f(a, b int) int {"}
	got, err := apply(m, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(src, "\t\treturn a\n\t}\n\treturn b\n}\n\nfunc g", "\t\treturn b\n\t}\n\treturn b\n}\n\nfunc g", 1)
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if line := lineOf(m, []byte(src)); line != 5 {
		t.Fatalf("lineOf = %d, want 5", line)
	}
}

func TestApplyRefusesALineMissingOrDoubled(t *testing.T) {
	cases := []struct {
		name string
		m    mutant
		want string
	}{
		{"missing", mutant{file: "p.go", from: "return c", to: "return a"}, `no line "return c"`},
		{"doubled", mutant{file: "p.go", from: "if a < b {", to: "if a > b {"}, "occurs 2 times, want once"},
		{"a line that only contains it", mutant{file: "p.go", from: "a < b", to: "a > b"}, `no line "a < b"`},
		{"anchor missing", mutant{file: "p.go", after: "func h() {", from: "return a", to: "return b"}, "occurs 0 times"},
		{"anchor doubled", mutant{file: "p.go", after: "}", from: "return a", to: "return b"}, "occurs 4 times"},
		{"nothing after the anchor", mutant{file: "p.go", after: "func g(a, b int) int {", from: "return c", to: "return b"}, `no line "return c" after`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := apply(c.m, []byte(src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("apply: %q, %v; want an error with %q", got, err, c.want)
			}
		})
	}
}

func TestParseCatalogue(t *testing.T) {
	text := `# a comment

mutant one
file   rules.go
from   return a
to     return b
breaks What it breaks,
       over two lines.
check  test ./pkg/x -run ^TestX$

mutant two
file   other.go
after  func g() {
from   x := 1
to     x := 2
breaks Something else.
check  sim -seeds 10
`
	got, err := parseCatalogue("pkg/x/mutants.txt", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []mutant{
		{id: "one", file: "pkg/x/rules.go", from: "return a", to: "return b", breaks: "What it breaks, over two lines.",
			check: "test ./pkg/x -run ^TestX$", layer: "pkg/x", at: "pkg/x/mutants.txt:3"},
		{id: "two", file: "pkg/x/other.go", after: "func g() {", from: "x := 1", to: "x := 2", breaks: "Something else.",
			check: "sim -seeds 10", layer: "pkg/x", at: "pkg/x/mutants.txt:11"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseCatalogueRefusesBadEntries(t *testing.T) {
	cases := map[string]string{
		"mutant a\nfile f.go\nfrom x\nto y\nbreaks z\n":                              "missing check",
		"mutant a\nfile f.go\nfrom x\nto x\nbreaks z\ncheck sim\n":                   "the same line",
		"mutant a\nfile f.go\nfrom x\nto y\nbreaks z\ncheck go test ./...\n":         "want sim or test",
		"mutant a\nfile f.go\nfrom x\nto y\nbreaks z\ncheck test ./pkg/x\n":          "-run",
		"mutant a\nfile f.go\nfrom x\nto y\nbreaks z\ncheck test ./pkg/... -run X\n": "one package",
		"mutant a\nfile f.go\nfrom x\nto y\nbreaks z\ncheck sim -first-violation\n":  "sets -first-violation",
		"mutant a\nfiles f.go\n":           "unknown key",
		"file f.go\n":                      "before the first mutant",
		"mutant a\nfile f.go\nfile g.go\n": "given twice",
	}
	for text, want := range cases {
		if _, err := parseCatalogue("m.txt", []byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
	if err := checkIDs([]mutant{{id: "a", at: "x:1"}, {id: "a", at: "y:1"}}); err == nil {
		t.Error("two mutants with one id: no error")
	}
}

func TestReadSim(t *testing.T) {
	caught := readSim(1, []byte("--- schedule 7: 1 violations\nfirst violation: seed 7, after 7 schedules (seeds 1 to 7 in order, 2 violations among the 9 schedules run), wall time 1s\n"))
	if !caught.failed || caught.seed != 7 || caught.ran != 7 || caught.broken != "" {
		t.Fatalf("caught: %+v", caught)
	}
	clean := readSim(0, []byte("virtual time 1h\n300 schedules, 0 violations\n"))
	if clean.failed || clean.ran != 300 || clean.broken != "" {
		t.Fatalf("clean: %+v", clean)
	}
	if o := readSim(1, []byte("pkg/election/rules.go:3:1: syntax error\n")); o.failed || o.broken == "" {
		t.Fatalf("a build failure: %+v", o)
	}
}

func TestReadTest(t *testing.T) {
	events := func(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	failing := readTest(1, events(
		`{"Action":"run","Test":"TestA"}`, `{"Action":"pass","Test":"TestA"}`,
		`{"Action":"run","Test":"TestB"}`, `{"Action":"run","Test":"TestB/one"}`,
		`{"Action":"fail","Test":"TestB/one"}`, `{"Action":"fail","Test":"TestB"}`, `{"Action":"fail"}`))
	if !failing.failed || failing.ran != 3 || failing.test != "TestB/one" {
		t.Fatalf("failing: %+v", failing)
	}
	passing := readTest(0, events(`{"Action":"run","Test":"TestA"}`, `{"Action":"pass","Test":"TestA"}`, `{"Action":"pass"}`))
	if passing.failed || passing.ran != 1 || passing.broken != "" {
		t.Fatalf("passing: %+v", passing)
	}
	repeated := readTest(1, events(`{"Action":"run","Test":"TestA"}`, `{"Action":"pass","Test":"TestA"}`,
		`{"Action":"run","Test":"TestA"}`, `{"Action":"fail","Test":"TestA"}`, `{"Action":"fail"}`))
	if !repeated.failed || repeated.ran != 2 || repeated.test != "TestA" {
		t.Fatalf("failing on its second run (-count): %+v", repeated)
	}
	if o := readTest(0, events(`{"Action":"output","Output":"testing: warning: no tests to run\n"}`, `{"Action":"pass"}`)); o.broken != "no test matched" {
		t.Fatalf("no test run: %+v", o)
	}
	build := readTest(1, events(`{"Action":"build-output","Output":"# p\n"}`, `{"Action":"build-output","Output":"a.go:1:1: declared and not used: x\n"}`,
		`{"Action":"build-fail"}`, `{"Action":"fail"}`))
	if build.failed || !strings.Contains(build.broken, "does not compile: a.go:1:1: declared and not used: x") {
		t.Fatalf("build failure: %+v", build)
	}
	hung := readTest(1, events(`{"Action":"run","Test":"TestA"}`, `{"Action":"output","Output":"panic: test timed out after 1s\n"}`, `{"Action":"fail"}`))
	if !hung.failed || hung.ran != 1 || !strings.HasPrefix(hung.test, "TestA (the test binary died: panic: test timed out") {
		t.Fatalf("a test that hangs: %+v", hung)
	}
	crashed := readTest(1, events(`{"Action":"run","Test":"TestA"}`, `{"Action":"pass","Test":"TestA"}`,
		`{"Action":"run","Test":"TestB"}`, `{"Action":"run","Test":"TestB/one"}`,
		`{"Action":"output","Test":"TestB/one","Output":"fatal error: concurrent map writes\n"}`,
		`{"Action":"output","Output":"FAIL\tp\t0.007s\n"}`, `{"Action":"fail"}`))
	if !crashed.failed || crashed.ran != 3 || crashed.test != "TestB/one (the test binary died: fatal error: concurrent map writes)" {
		t.Fatalf("a test binary that died in a test: %+v", crashed)
	}
	if o := readTest(1, events(`{"Action":"run","Test":"TestA"}`, `{"Action":"pass","Test":"TestA"}`, `{"Action":"output","Output":"panic: in TestMain\n"}`, `{"Action":"fail"}`)); o.failed {
		t.Fatalf("a binary that died outside any test caught nothing: %+v", o)
	}
}
