package statusview

import (
	"encoding/json"
	"io"
)

// List is the -o json output without --watch.
type List struct {
	Elections []Row `json:"elections"`
}

// printJSON writes v as one line of JSON (--watch -o json).
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// printJSONIndented writes v as indented JSON, as kubectl -o json does.
func printJSONIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
