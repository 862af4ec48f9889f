package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// The page whose table of flags and variables is generated from the
// sidecar's flag set, the markers around the table, and the command that
// rewrites it.
const (
	configurationDoc    = "../../docs/configuration.md"
	regenerateFlagTable = "go test ./cmd/sidecar -run TestConfigurationDocIsGenerated -update"
	flagTableBegin      = "<!-- generated from the flags in cmd/sidecar by " + regenerateFlagTable + ": begin -->\n"
	flagTableEnd        = "<!-- generated: end -->\n"
)

// The table of docs/configuration.md is the sidecar's flag set rendered:
// every flag the sidecar accepts, and nothing else, with its default and
// meaning as defined beside the flag.
func TestConfigurationDocIsGenerated(t *testing.T) {
	checkGenerated(t, configurationDoc, flagTableBegin, flagTableEnd, flagTable(newSidecarConfig().set), regenerateFlagTable)
}

// A row shows a flag's own default in code font and its --help text
// without the variable, unless annotations say more; a "|" cannot end a
// cell.
func TestFlagTableRows(t *testing.T) {
	fs := newFlagSet("example")
	fs.String("plain", "value", "what it sets, see --other [env LEADER_SIDECAR_PLAIN]")
	fs.String("empty", "", "no default")
	fs.BoolP("annotated", "a", false, "terse help")
	docDefault(fs, "annotated", "")
	docMeaning(fs, "annotated", "the page's text: `a|b`")
	want := "| flag | default | meaning |\n|---|---|---|\n" +
		"| `--plain` | `value` | what it sets, see `--other` |\n" +
		"| `--empty` |  | no default |\n" +
		"| `--annotated`, `-a` |  | the page's text: `a\\|b` |\n"
	if got := flagTable(fs); got != want {
		t.Fatalf("flagTable:\n%s\nwant:\n%s", got, want)
	}
}

// checkGenerated compares the text of file between begin and end with
// generated; with -update it writes generated there instead. Its failure
// shows the lines that differ and the command that regenerates them.
func checkGenerated(t *testing.T, file, begin, end, generated, command string) {
	t.Helper()
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, foundBegin := strings.Cut(string(content), begin)
	committed, tail, foundEnd := strings.Cut(rest, end)
	if !foundBegin || !foundEnd {
		t.Fatalf("%s: no generated part between %q and %q", file, begin, end)
	}
	if committed == generated {
		return
	}
	if *update {
		if err := os.WriteFile(file, []byte(head+begin+generated+end+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: generated part rewritten", file)
		return
	}
	t.Errorf("%s is not what its source generates; run\n\t%s\n(-committed +generated):\n%s",
		file, command, lineDiff(committed, generated))
}

// lineDiff lists the lines only in a (-) and only in b (+), each in its
// order: enough for a table of one line per row.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var d strings.Builder
	for _, l := range al {
		if !slices.Contains(bl, l) {
			fmt.Fprintf(&d, "-%s\n", l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			fmt.Fprintf(&d, "+%s\n", l)
		}
	}
	if d.Len() == 0 {
		return "(the same lines in another order)\n"
	}
	return d.String()
}
