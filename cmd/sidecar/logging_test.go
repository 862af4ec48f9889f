package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// JSON logs write durations as "15s", not as integer nanoseconds, at the
// top level, inside groups, and from slog.Any; other values are untouched.
func TestJSONLogsWriteDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(logConfig{format: "json", level: "info"}, &buf)
	log.Info("timings", "leaseDuration", 15*time.Second, "wait", 1500*time.Millisecond, "count", 3,
		slog.Group("retry", "period", 2*time.Second), slog.Any("deadline", 10*time.Second))
	log.With("lease", time.Minute).Info("with")

	var lines []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	first := lines[0]
	want := map[string]any{"leaseDuration": "15s", "wait": "1.5s", "count": float64(3), "deadline": "10s"}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %#v, want %#v", k, first[k], v)
		}
	}
	if g, _ := first["retry"].(map[string]any); g["period"] != "2s" {
		t.Errorf("retry.period = %#v, want \"2s\"", first["retry"])
	}
	if lines[1]["lease"] != "1m0s" {
		t.Errorf("lease = %#v, want \"1m0s\"", lines[1]["lease"])
	}
}

func TestTextLogsWriteDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	newLogger(logConfig{format: "text", level: "info"}, &buf).Info("timings", "leaseDuration", 15*time.Second)
	if !strings.Contains(buf.String(), "leaseDuration=15s") {
		t.Fatalf("got %q", buf.String())
	}
}
