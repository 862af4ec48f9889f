package main

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
)

// catalogueName is the name of a catalogue file: one in each package
// directory that has seeded bugs, naming files of that directory.
const catalogueName = "mutants.txt"

// A mutant is one seeded bug: one line of one file replaced.
type mutant struct {
	id string
	// file is the mutated file, relative to the repository's root.
	file string
	// after, if set, is a line that occurs exactly once in the file; the
	// mutated line is then the first line equal to from after it.
	after string
	// from is the original line and to its replacement, both without the
	// indentation (the line keeps its own).
	from, to string
	// breaks says in one sentence what the mutant breaks.
	breaks string
	// check is the check meant to catch it (see parseCheck).
	check string
	// layer is the directory of the catalogue, where the mutant lives.
	layer string
	// at is where the entry is written: "<catalogue>:<line>".
	at string
}

// parseCatalogue reads one catalogue file, name being its path relative
// to the repository's root. Entries are blocks of "key value" lines
// separated by blank lines; "#" starts a comment line; an indented line
// continues the value of the line before it (joined with a space).
// Every key but after is required:
//
//	mutant <id>
//	file   <file, relative to the catalogue's directory>
//	after  <a line that occurs once, before the mutated line> (optional)
//	from   <the original line, exactly, without its indentation>
//	to     <its replacement>
//	breaks <what the mutant breaks, in one sentence>
//	check  <the check meant to catch it>
func parseCatalogue(name string, data []byte) ([]mutant, error) {
	dir := path.Dir(name)
	var (
		out  []mutant
		cur  *mutant
		last *string
	)
	finish := func() error {
		if cur == nil {
			return nil
		}
		m := *cur
		cur, last = nil, nil
		var missing []string
		for _, f := range []struct{ key, value string }{
			{"mutant", m.id}, {"file", m.file}, {"from", m.from}, {"to", m.to}, {"breaks", m.breaks}, {"check", m.check},
		} {
			if f.value == "" {
				missing = append(missing, f.key)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s: mutant %q: missing %s", m.at, m.id, strings.Join(missing, ", "))
		}
		if m.from == m.to {
			return fmt.Errorf("%s: mutant %q: from and to are the same line", m.at, m.id)
		}
		if _, err := parseCheck(m.check); err != nil {
			return fmt.Errorf("%s: mutant %q: check: %w", m.at, m.id, err)
		}
		m.file = path.Join(dir, m.file)
		out = append(out, m)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		case strings.HasPrefix(trimmed, "#"):
			continue
		case line[0] == ' ' || line[0] == '\t':
			if last == nil {
				return nil, fmt.Errorf("%s:%d: an indented line continues nothing", name, n)
			}
			*last += " " + trimmed
			continue
		}
		key, value, _ := strings.Cut(trimmed, " ")
		value = strings.TrimSpace(value)
		if key == "mutant" {
			if err := finish(); err != nil {
				return nil, err
			}
			cur = &mutant{id: value, layer: dir, at: fmt.Sprintf("%s:%d", name, n)}
			last = &cur.id
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%s:%d: %q before the first mutant line", name, n, key)
		}
		fields := map[string]*string{"file": &cur.file, "after": &cur.after, "from": &cur.from, "to": &cur.to, "breaks": &cur.breaks, "check": &cur.check}
		f, ok := fields[key]
		if !ok {
			return nil, fmt.Errorf("%s:%d: unknown key %q (want mutant, file, after, from, to, breaks or check)", name, n, key)
		}
		if *f != "" {
			return nil, fmt.Errorf("%s:%d: mutant %q: %s given twice", name, n, cur.id, key)
		}
		*f, last = value, f
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkIDs fails if two mutants share an id.
func checkIDs(ms []mutant) error {
	seen := map[string]string{}
	for _, m := range ms {
		if at, ok := seen[m.id]; ok {
			return fmt.Errorf("mutant %q is in %s and %s", m.id, at, m.at)
		}
		seen[m.id] = m.at
	}
	return nil
}

// apply returns src with m's line replaced, or an error if the line is
// not there exactly once (or, with after, the anchor is not there exactly
// once or no such line follows it): a catalogue whose code moved on fails
// loudly instead of seeding nothing. Lines are compared without their
// surrounding white space; the replacement keeps the original's
// indentation.
func apply(m mutant, src []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	matching := func(want string, from int) []int {
		var at []int
		for i := from; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == want {
				at = append(at, i)
			}
		}
		return at
	}
	from := 0
	if m.after != "" {
		anchors := matching(m.after, 0)
		if len(anchors) != 1 {
			return nil, fmt.Errorf("%s: the line after which to look (%q) occurs %d times, want once", m.file, m.after, len(anchors))
		}
		from = anchors[0] + 1
	}
	at := matching(m.from, from)
	switch {
	case len(at) == 0 && m.after != "":
		return nil, fmt.Errorf("%s: no line %q after %q", m.file, m.from, m.after)
	case len(at) == 0:
		return nil, fmt.Errorf("%s: no line %q", m.file, m.from)
	case len(at) > 1 && m.after == "":
		return nil, fmt.Errorf("%s: the line %q occurs %d times, want once (name a line before it with after)", m.file, m.from, len(at))
	}
	i := at[0]
	line := lines[i]
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	end := line[len(strings.TrimRight(line, " \t\r\n")):]
	lines[i] = indent + m.to + end
	return []byte(strings.Join(lines, "")), nil
}

// lineOf returns the 1-based line of src that m mutates (after apply
// succeeded on src).
func lineOf(m mutant, src []byte) int {
	lines := strings.Split(string(src), "\n")
	start := 0
	if m.after != "" {
		for i, l := range lines {
			if strings.TrimSpace(l) == m.after {
				start = i + 1
				break
			}
		}
	}
	for i := start; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == m.from {
			return i + 1
		}
	}
	return 0
}
