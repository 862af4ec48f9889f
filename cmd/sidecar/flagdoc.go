package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
)

// The table of flags in docs/configuration.md is generated from the
// sidecar's flag set, so each flag is written down once, where it is
// defined: its name, its default and its --help text, and, where the page
// says more than --help, two annotations beside it that docDefault and
// docMeaning set. flagTable renders the table; TestConfigurationDocIsGenerated
// checks that the page holds it (go test ./cmd/sidecar -run
// TestConfigurationDocIsGenerated -update rewrites it).

// The annotation keys of a flag's row in the docs. Neither changes --help.
const (
	docDefaultKey = "leader-sidecar.io/doc-default"
	docMeaningKey = "leader-sidecar.io/doc-meaning"
)

// docDefault sets the default the docs show for flag name of fs, in
// Markdown ("" for none), when the flag's own default, in code font, would
// not tell a reader (an empty string that means "$POD_NAME, else the
// hostname", a 0s derived from other flags).
func docDefault(fs *pflag.FlagSet, name, markdown string) {
	annotate(fs, name, docDefaultKey, markdown)
}

// docMeaning sets the meaning the docs give flag name of fs, in Markdown
// (code font, links to other pages), when its --help text is not the whole
// story.
func docMeaning(fs *pflag.FlagSet, name, markdown string) {
	annotate(fs, name, docMeaningKey, markdown)
}

// annotate sets an annotation on a flag defined just before. A misspelt
// name sets nothing, and the page's row then differs from the one
// committed, which TestConfigurationDocIsGenerated reports.
func annotate(fs *pflag.FlagSet, name, key, value string) {
	_ = fs.SetAnnotation(name, key, []string{value})
}

// flagTable renders fs as a Markdown table, flag | default | meaning, one
// row per flag in the order of --help.
func flagTable(fs *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name += ", `-" + f.Shorthand + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, cell(flagDocDefault(f)), cell(flagDocMeaning(f)))
	})
	return b.String()
}

// flagDocDefault is the default of f as the docs show it: its annotation,
// else its own default in code font (nothing for an empty one).
func flagDocDefault(f *pflag.Flag) string {
	if v, ok := f.Annotations[docDefaultKey]; ok {
		return v[0]
	}
	if f.DefValue == "" {
		return ""
	}
	return "`" + f.DefValue + "`"
}

// flagMention is another flag named in a --help text.
var flagMention = regexp.MustCompile(`--[a-z0-9][a-z0-9-]*`)

// flagDocMeaning is the meaning of f as the docs give it: its annotation,
// else its --help text, without the variable (the page names the rule
// once) and with the flags it names in code font.
func flagDocMeaning(f *pflag.Flag) string {
	if v, ok := f.Annotations[docMeaningKey]; ok {
		return v[0]
	}
	usage := strings.TrimSuffix(f.Usage, " [env "+envName(f.Name)+"]")
	return flagMention.ReplaceAllString(usage, "`$0`")
}

// cell escapes what would end a Markdown table cell.
func cell(markdown string) string {
	return strings.ReplaceAll(markdown, "|", `\|`)
}
