package main

import "testing"

func TestDialable(t *testing.T) {
	for in, want := range map[string]string{
		":8081":          "127.0.0.1:8081",
		"0.0.0.0:8081":   "127.0.0.1:8081",
		"[::]:8081":      "127.0.0.1:8081",
		"10.1.2.3:8081":  "10.1.2.3:8081",
		"localhost:4040": "localhost:4040",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}
