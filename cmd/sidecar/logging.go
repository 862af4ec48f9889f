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

// The default --log-level of the sidecar, and of sidecar lock, which logs
// only what goes wrong unless asked (--verbose).
const (
	sidecarLogLevel = "info"
	lockLogLevel    = "warn"
)

// logConfig is how a command logs: the logging flags every long-running
// command shares.
type logConfig struct {
	// format is text or json; level is debug, info, warn or error.
	format, level string
}

// add adds --log-format and --log-level, whose default is level.
func (c *logConfig) add(fs *pflag.FlagSet, level string) {
	fs.StringVar(&c.format, "log-format", "text", "log format: text or json")
	docMeaning(fs, "log-format", "`text` or `json` (log/slog)")
	fs.StringVar(&c.level, "log-level", level, "log level: debug, info, warn or error")
	docDefault(fs, "log-level", "`"+sidecarLogLevel+"` (`"+lockLogLevel+"` for `sidecar lock`)")
	docMeaning(fs, "log-level", "`debug`, `info`, `warn`, `error`; `debug` logs every store request (operation, duration, holder, token, error) and every decision of the election")
}

func (c *logConfig) check() error {
	if !slices.Contains(logFormats, c.format) {
		return oneOf("--log-format", c.format, logFormats)
	}
	var level slog.Level
	if !slices.Contains(logLevels, c.level) || level.UnmarshalText([]byte(c.level)) != nil {
		return oneOf("--log-level", c.level, logLevels)
	}
	return nil
}

// slogLevel is the level as slog's (check has made sure it is one).
func (c *logConfig) slogLevel() slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.level))
	return level
}

// newLogger returns the command's logger and sends client-go's klog output
// into it, so every line has one format. Durations are written as Go
// duration strings ("15s", "1.5s") in both formats: slog's JSON handler
// would write them as integer nanoseconds.
func newLogger(c logConfig, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: c.slogLevel(), ReplaceAttr: durationsAsStrings}
	var log *slog.Logger
	if c.format == "json" {
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
