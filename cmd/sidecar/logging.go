package main

import (
	"io"
	"log/slog"
	"slices"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// logFlags are the logging flags every long-running command shares.
type logFlags struct {
	format, level string
}

// add adds --log-format and --log-level, whose default is level.
func (f *logFlags) add(fs *pflag.FlagSet, level string) {
	fs.StringVar(&f.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.level, "log-level", level, "log level: debug, info, warn or error")
}

// logConfig is how a command logs, checked.
type logConfig struct {
	json  bool
	level slog.Level
}

func (f *logFlags) config() (logConfig, error) {
	if !slices.Contains(logFormats, f.format) {
		return logConfig{}, oneOf("--log-format", f.format, logFormats)
	}
	var level slog.Level
	if !slices.Contains(logLevels, f.level) || level.UnmarshalText([]byte(f.level)) != nil {
		return logConfig{}, oneOf("--log-level", f.level, logLevels)
	}
	return logConfig{json: f.format == "json", level: level}, nil
}

// newLogger returns the command's logger and sends client-go's klog output
// into it, so every line has one format. Durations are written as Go
// duration strings ("15s", "1.5s") in both formats: slog's JSON handler
// would write them as integer nanoseconds.
func newLogger(c logConfig, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: c.level, ReplaceAttr: durationsAsStrings}
	var log *slog.Logger
	if c.json {
		log = slog.New(slog.NewJSONHandler(w, hopts))
	} else {
		log = slog.New(slog.NewTextHandler(w, hopts))
	}
	klog.SetSlogLogger(log.With("source", "client-go"))
	return log
}

// durationsAsStrings is a slog ReplaceAttr that turns a time.Duration
// value, at any depth of groups, into its String form.
func durationsAsStrings(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
