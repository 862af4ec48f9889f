package election

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend/memory"
)

// At debug level every store request and every decision is logged; at
// info level neither is.
func TestDebugLogShowsRequestsAndDecisions(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		var buf bytes.Buffer
		e, err := New(Config{Backend: memory.NewStore().Open("debug"), Identity: "me",
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: c.level}))})
		if err != nil {
			t.Fatal(err)
		}
		e.Driver().Attempt(context.Background())
		e.Driver().Attempt(context.Background())
		out := buf.String()
		for _, line := range []string{
			`msg="store request" identity=me lease=memory#debug op=get`,
			`msg="store request" identity=me lease=memory#debug op=create`,
			`msg=decided identity=me lease=memory#debug action=recreate token=1`,
			`msg="store request" identity=me lease=memory#debug op=update`,
		} {
			if strings.Contains(out, line) != c.want {
				t.Errorf("level %v: %q logged: %v, want %v\n%s", c.level, line, !c.want, c.want, out)
			}
		}
	}
}
