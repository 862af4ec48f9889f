package chartschema

import (
	"strings"
	"testing"
)

// A value decoded and encoded again is the same text when it is written
// as encode writes: key order, numbers and non-ASCII characters kept.
func TestEncodeWritesWhatDecodeRead(t *testing.T) {
	const text = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "z": 1,
  "a": [
    "µs",
    65535,
    1.50,
    true,
    null,
    {}
  ],
  "m": {
    "pattern": "^a<b>&c\\.d$",
    "empty": []
  }
}
`
	v, err := decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	out, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != text {
		t.Fatalf("encoded:\n%s\nwant:\n%s", out, text)
	}
}

func TestDecodeRefusesWhatASourceMustNotHold(t *testing.T) {
	for _, c := range []struct{ name, text, says string }{
		{"a key twice", `{"a": 1, "a": 2}`, `key "a" given twice`},
		{"a key twice, nested", `{"a": {"b": 1, "b": 1}}`, `key "b" given twice`},
		{"two values", `{} {}`, "data after the value"},
		{"not JSON", `{"a": }`, "invalid character"},
		{"cut short", `{"a": [1`, "unexpected EOF"},
		{"empty", ``, "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decode([]byte(c.text)); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("decode(%s): %v, want an error saying %q", c.text, err, c.says)
			}
		})
	}
}
