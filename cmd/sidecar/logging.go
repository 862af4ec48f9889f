package main

import (
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

// newLogger returns the sidecar's logger and sends client-go's klog output
// into it, so every line has one format.
func newLogger(o *options, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel)) // validated before
	hopts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	if o.logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(w, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(w, hopts))
	}
	klog.SetSlogLogger(log.With("source", "client-go"))
	return log
}
