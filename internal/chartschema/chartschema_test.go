package chartschema

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// sources is a repository holding the library's source and each chart's,
// the example's given as example; the injector's uses the kinds backends.
func sources(library, lib, example string) fstest.MapFS {
	return fstest.MapFS{
		librarySource: {Data: []byte(library)},
		"charts/leader-sidecar-lib/schema/chart.json":      {Data: []byte(lib)},
		"charts/leader-sidecar-example/schema/chart.json":  {Data: []byte(example)},
		"charts/leader-sidecar-injector/schema/chart.json": {Data: []byte(injector)},
	}
}

const injector = `{"title": "injector", "properties": {"backend": {"enum": {"$kinds": "backends"}}}}`

// A chart's part comes first, the library's keys follow, objects in both
// are merged, and each {"$kinds": name} becomes its list; the injector
// takes the library's definitions alone.
func TestRenderMergesEachChartWithTheLibrary(t *testing.T) {
	repo := sources(
		`{"definitions": {"duration": {"type": "string"}}, "properties": {"sidecar": {"type": "object", "properties": {"backend": {"enum": {"$kinds": "backends"}}}}}}`,
		`{"title": "lib"}`,
		`{"title": "example", "properties": {"app": {"type": "object"}, "sidecar": {"required": ["backend"]}}}`)
	files, err := Render(repo, Kinds{"backends": {"lease", "sqlite"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{"charts/leader-sidecar-lib/values.schema.json", []byte(`{
  "title": "lib",
  "definitions": {
    "duration": {
      "type": "string"
    }
  },
  "properties": {
    "sidecar": {
      "type": "object",
      "properties": {
        "backend": {
          "enum": [
            "lease",
            "sqlite"
          ]
        }
      }
    }
  }
}
`)},
		{"charts/leader-sidecar-example/values.schema.json", []byte(`{
  "title": "example",
  "properties": {
    "app": {
      "type": "object"
    },
    "sidecar": {
      "required": [
        "backend"
      ],
      "type": "object",
      "properties": {
        "backend": {
          "enum": [
            "lease",
            "sqlite"
          ]
        }
      }
    }
  },
  "definitions": {
    "duration": {
      "type": "string"
    }
  }
}
`)},
		{"charts/leader-sidecar-injector/values.schema.json", []byte(`{
  "title": "injector",
  "properties": {
    "backend": {
      "enum": [
        "lease",
        "sqlite"
      ]
    }
  },
  "definitions": {
    "duration": {
      "type": "string"
    }
  }
}
`)},
	}
	if len(files) != len(want) {
		t.Fatalf("%d files, want %d", len(files), len(want))
	}
	for i := range want {
		if files[i].Path != want[i].Path || !bytes.Equal(files[i].Data, want[i].Data) {
			t.Errorf("file %d: %s:\n%s\nwant %s:\n%s", i, files[i].Path, files[i].Data, want[i].Path, want[i].Data)
		}
	}
}

func TestRenderRefusesSourcesThatDisagree(t *testing.T) {
	const library = `{"properties": {"sidecar": {"type": "object", "properties": {"backend": {"enum": {"$kinds": "backends"}}}}}}`
	backends := Kinds{"backends": {"lease"}}
	for _, c := range []struct {
		name                  string
		library, lib, example string
		kinds                 Kinds
		says                  string
	}{
		{name: "a chart changes a library value", library: library, lib: `{}`,
			example: `{"properties": {"sidecar": {"type": "string"}}}`, kinds: backends,
			says: "/properties/sidecar/type is in both"},
		{name: "a chart replaces a library object", library: library, lib: `{}`,
			example: `{"properties": {"sidecar": true}}`, kinds: backends,
			says: "/properties/sidecar is in both"},
		{name: "an unknown list", library: library, lib: `{}`, example: `{}`, kinds: Kinds{"modes": {"none"}},
			says: `/properties/sidecar/properties/backend/enum: no kinds named "backends"`},
		{name: "a list no source uses", library: library, lib: `{}`, example: `{}`,
			kinds: Kinds{"backends": {"lease"}, "modes": {"none"}}, says: `the kinds "modes" are in no`},
		{name: "an empty list", library: library, lib: `{}`, example: `{}`, kinds: Kinds{"backends": nil},
			says: "an empty list"},
		{name: "$kinds beside other keys", library: `{"enum": {"$kinds": "backends", "x": 1}}`, lib: `{}`,
			example: `{}`, kinds: backends, says: "/enum: {\"$kinds\": name} must be an object of that one key"},
		{name: "a source not an object", library: `[]`, lib: `{}`, example: `{}`, kinds: backends,
			says: librarySource + ": not a JSON object"},
		{name: "a source not JSON", library: library, lib: `{`, example: `{}`, kinds: backends,
			says: "charts/leader-sidecar-lib/schema/chart.json: unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(sources(c.library, c.lib, c.example), c.kinds)
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Render: %v, want an error saying %q", err, c.says)
			}
		})
	}
}

// The repository's own sources render, twice alike, to JSON that holds
// the lists given.
func TestRenderOfTheRepositoryIsDeterministic(t *testing.T) {
	repo := os.DirFS("../..")
	kinds := Kinds{"backends": {"b1", "b2"}, "readinessModes": {"m1"}}
	first, err := Render(repo, kinds)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Render(repo, kinds)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatal("two renders of the same sources differ")
	}
	for _, f := range first {
		var schema map[string]any
		if err := json.Unmarshal(f.Data, &schema); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if !bytes.HasSuffix(f.Data, []byte("}\n")) || !bytes.Contains(f.Data, []byte("\n  \"properties\": {\n")) {
			t.Errorf("%s is not indented by two spaces with a final newline", f.Path)
		}
		if !bytes.Contains(f.Data, []byte(`"b1",`)) || !bytes.Contains(f.Data, []byte(`"m1"`)) {
			t.Errorf("%s lacks the lists given", f.Path)
		}
	}
}
