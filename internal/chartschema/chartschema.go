// Package chartschema generates the charts' values.schema.json files, so
// that the schema of the library's settings, and the lists of kinds the
// sidecar binary knows, are each written once.
//
// The sources, under each chart's schema/ directory (which .helmignore
// keeps out of the packaged chart):
//   - charts/leader-sidecar-lib/schema/library.json: the values the
//     library reads, sidecar: and the top-level Pod settings, with their
//     definitions. Every chart in Charts gets it whole.
//   - charts/<chart>/schema/chart.json: the chart's own part: its title,
//     its own values, and what it requires of the library's.
//
// The injector (leader-sidecar-injector) renders the sidecar from its
// policy, not from the library's templates, so it takes the library's
// definitions (the duration pattern, ...) but not its values.
//
// A chart's schema is its own part merged with the library's. Keys keep
// the order of the sources, the chart's first, then the library's others.
// A key in both must hold an object in both, and the two are merged the
// same way; any other key in both is an error. So a chart adds to the
// library's schema (a "required", a value of its own) and never changes
// it.
//
// In a source, an object {"$kinds": "name"} stands for the list Kinds
// holds under that name: the kinds only the binary knows, such as the
// values of --backend. Every name must be known, and every list used.
//
// A chart of templateDefinitions gets, besides its values.schema.json, a
// template helper templates/_schema.tpl that holds its schema's
// definitions as JSON (include "<chart>.schemaDefinitions" | fromJson):
// the injector's ValidatingAdmissionPolicy checks the values a Pod's
// annotations give with the same patterns and enums as the schema checks
// the chart's values.
//
// Render is deterministic: the same sources and lists give the same bytes,
// indented by two spaces, with a final newline.
package chartschema

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Charts are the charts whose values.schema.json Render generates.
var Charts = []string{"leader-sidecar-lib", "leader-sidecar-example", "leader-sidecar-injector"}

// definitionsOnly are the charts of Charts that take only the library's
// definitions, not its values.
var definitionsOnly = map[string]bool{"leader-sidecar-injector": true}

// templateDefinitions are the charts of Charts whose templates read their
// schema's definitions (from templates/_schema.tpl).
var templateDefinitions = map[string]bool{"leader-sidecar-injector": true}

// librarySource is the part of every chart's schema that describes the
// values the library reads.
const librarySource = "charts/leader-sidecar-lib/schema/library.json"

// kindsKey is the key of an object that stands for a list of Kinds.
const kindsKey = "$kinds"

// Kinds maps the name in a source's {"$kinds": name} to its list.
type Kinds map[string][]string

// A File is a generated file: its slash-separated path from the
// repository's root, and its content.
type File struct {
	Path string
	Data []byte
}

// Render reads the sources from repo, the repository's root, and returns
// the values.schema.json of each of Charts, in that order, each followed by
// the chart's templates/_schema.tpl if it is one of templateDefinitions.
// Its errors name the source or chart, and the key, at fault.
func Render(repo fs.FS, kinds Kinds) ([]File, error) {
	library, err := readSource(repo, librarySource)
	if err != nil {
		return nil, err
	}
	var files []File
	usedByAny := map[string]bool{}
	for _, chart := range Charts {
		source := path.Join("charts", chart, "schema", "chart.json")
		own, err := readSource(repo, source)
		if err != nil {
			return nil, err
		}
		lib := library
		if definitionsOnly[chart] {
			lib = newObject()
			if d, ok := library.values["definitions"]; ok {
				lib.set("definitions", d)
			}
		}
		merged, err := merge(own, lib, "")
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", source, librarySource, err)
		}
		used := map[string]bool{}
		filled, err := fillKinds(merged, kinds, used, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", chart, err)
		}
		for name := range used {
			usedByAny[name] = true
		}
		data, err := encode(filled)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", chart, err)
		}
		files = append(files, File{Path: path.Join("charts", chart, "values.schema.json"), Data: data})
		if templateDefinitions[chart] {
			helper, err := definitionsTemplate(chart, filled)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", chart, err)
			}
			files = append(files, helper)
		}
	}
	for name := range kinds {
		if !usedByAny[name] {
			return nil, fmt.Errorf("the kinds %q are in no {%q: %q} of any chart's sources", name, kindsKey, name)
		}
	}
	return files, nil
}

// readSource decodes the source at name, which must be an object.
func readSource(repo fs.FS, name string) (*object, error) {
	data, err := fs.ReadFile(repo, name)
	if err != nil {
		return nil, err
	}
	v, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	o, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", name)
	}
	return o, nil
}

// merge is a new object with the keys of own, then those of library that
// own lacks. A key in both must be an object in both; at is the JSON
// pointer of the two, for errors. Neither argument is changed.
func merge(own, library *object, at string) (*object, error) {
	out := newObject()
	for _, key := range own.keys {
		out.set(key, own.values[key])
	}
	for _, key := range library.keys {
		lib := library.values[key]
		mine, ok := own.values[key]
		if !ok {
			out.set(key, lib)
			continue
		}
		a, aok := mine.(*object)
		b, bok := lib.(*object)
		if !aok || !bok {
			return nil, fmt.Errorf("%s/%s is in both: a chart may add to the library's schema, not change it", at, key)
		}
		m, err := merge(a, b, at+"/"+key)
		if err != nil {
			return nil, err
		}
		out.set(key, m)
	}
	return out, nil
}

// fillKinds is a copy of v with each {"$kinds": name} replaced by the list
// kinds holds under name, which it records in used; at is v's JSON
// pointer, for errors.
func fillKinds(v any, kinds Kinds, used map[string]bool, at string) (any, error) {
	switch v := v.(type) {
	case *object:
		if ref, ok := v.values[kindsKey]; ok {
			name, isName := ref.(string)
			list, known := kinds[name]
			switch {
			case len(v.keys) != 1 || !isName:
				return nil, fmt.Errorf("%s: {%q: name} must be an object of that one key, its value a string", at, kindsKey)
			case !known:
				return nil, fmt.Errorf("%s: no kinds named %q", at, name)
			case len(list) == 0:
				return nil, fmt.Errorf("%s: the kinds %q are an empty list, which no value matches", at, name)
			}
			used[name] = true
			out := make([]any, len(list))
			for i, kind := range list {
				out[i] = kind
			}
			return out, nil
		}
		out := newObject()
		for _, key := range v.keys {
			filled, err := fillKinds(v.values[key], kinds, used, at+"/"+key)
			if err != nil {
				return nil, err
			}
			out.set(key, filled)
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			filled, err := fillKinds(item, kinds, used, fmt.Sprintf("%s/%d", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = filled
		}
		return out, nil
	}
	return v, nil
}

// definitionsTemplate is the template helper of chart that holds the
// definitions of its schema, as JSON, for include ... | fromJson.
func definitionsTemplate(chart string, schema any) (File, error) {
	var defs any = newObject()
	if o, ok := schema.(*object); ok {
		if d, ok := o.values["definitions"]; ok {
			defs = d
		}
	}
	data, err := encode(defs)
	if err != nil {
		return File{}, err
	}
	// Inside a define, {{ or }} would be read as an action.
	if bytes.Contains(data, []byte("{{")) || bytes.Contains(data, []byte("}}")) {
		return File{}, fmt.Errorf("the definitions hold {{ or }}, which a template cannot hold as text")
	}
	var b strings.Builder
	b.WriteString("{{- /*\n")
	b.WriteString("Generated by internal/chartschema from schema/chart.json and\n")
	b.WriteString("charts/leader-sidecar-lib/schema/library.json: do not edit. The\n")
	b.WriteString("definitions of values.schema.json, as JSON, for the templates that check\n")
	b.WriteString("the same settings where the schema cannot (a Pod's annotations).\n")
	b.WriteString("Regenerate: go test ./cmd/sidecar/ -run TestChartSchemasAreGenerated -update\n")
	b.WriteString("*/ -}}\n")
	fmt.Fprintf(&b, "{{- define %q -}}\n", chart+".schemaDefinitions")
	b.Write(data)
	b.WriteString("{{- end }}\n")
	return File{Path: path.Join("charts", chart, "templates", "_schema.tpl"), Data: []byte(b.String())}, nil
}
