package chartschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// object is a JSON object that keeps its keys in the order of its source,
// so that a generated schema reads in the order its source was written.
// Its values, like those of the arrays, are *object, []any, string,
// json.Number, bool or nil.
type object struct {
	keys   []string
	values map[string]any
}

// newObject is an empty object.
func newObject() *object {
	return &object{values: map[string]any{}}
}

// set adds key, or replaces its value in place.
func (o *object) set(key string, v any) {
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = v
}

// decode reads one JSON value from data, numbers kept as written. It
// refuses a key given twice in one object and anything after the value.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if errors.Is(err, io.EOF) {
		return nil, io.ErrUnexpectedEOF // the data ends inside a value, or holds none
	}
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the value at offset %d", dec.InputOffset())
	}
	return v, nil
}

// decodeValue reads the value that starts at dec's next token.
func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := newObject()
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key := tok.(string) // the decoder gives only strings as keys
			if _, ok := o.values[key]; ok {
				return nil, fmt.Errorf("key %q given twice at offset %d", key, dec.InputOffset())
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(key, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return tok, nil // string, json.Number, bool or nil
}

// encode writes v as indented JSON: two spaces a level, every member of
// an object and every item of an array on a line of its own, empty ones
// as {} and [], no escaping of <, > and &, and a final newline.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeValue(&b, v, ""); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// encodeValue writes v to b, its inner lines indented by indent plus two
// spaces.
func encodeValue(b *bytes.Buffer, v any, indent string) error {
	inner := indent + "  "
	switch v := v.(type) {
	case *object:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteString("{\n")
		for i, key := range v.keys {
			b.WriteString(inner)
			if err := encodeScalar(b, key); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := encodeValue(b, v.values[key], inner); err != nil {
				return err
			}
			b.WriteString(separator(i, len(v.keys)))
		}
		b.WriteString(indent + "}")
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[\n")
		for i, item := range v {
			b.WriteString(inner)
			if err := encodeValue(b, item, inner); err != nil {
				return err
			}
			b.WriteString(separator(i, len(v)))
		}
		b.WriteString(indent + "]")
	default:
		return encodeScalar(b, v)
	}
	return nil
}

// separator ends the line of member or item i of n.
func separator(i, n int) string {
	if i < n-1 {
		return ",\n"
	}
	return "\n"
}

// encodeScalar writes a string, number, bool or null.
func encodeScalar(b *bytes.Buffer, v any) error {
	switch v.(type) {
	case string, json.Number, bool, nil:
	default:
		return fmt.Errorf("cannot encode a %T", v)
	}
	var s strings.Builder
	enc := json.NewEncoder(&s)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.WriteString(strings.TrimSuffix(s.String(), "\n"))
	return nil
}
