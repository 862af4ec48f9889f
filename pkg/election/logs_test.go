package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/leader-sidecar/leader-sidecar/pkg/backend"
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

// cancelledGets answers a read whose context is done with that context's
// error, wrapped as a backend wraps it.
type cancelledGets struct{ backend.Backend }

func (b cancelledGets) Get(ctx context.Context) (backend.Record, backend.Version, error) {
	if err := ctx.Err(); err != nil {
		return backend.Record{}, "", fmt.Errorf("store: get: %w", err)
	}
	return b.Backend.Get(ctx)
}

// A request cancelled because the candidate is stopping is not a store
// failure: nothing is logged at warning level for it (sidecar lock is
// quiet by default, and its --nonblock and --timeout stop a candidate in
// the middle of a read). A store that fails is still warned about.
func TestARequestCancelledByTheStopIsNoFailure(t *testing.T) {
	store := memory.NewStore()
	for _, c := range []struct {
		name     string
		cancel   bool
		storeErr error
		warned   bool
	}{
		{"cancelled by the stop", true, nil, false},
		{"failing store", false, errors.New("disk full"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			e, err := New(Config{Backend: cancelledGets{store.Open("cancel-" + c.name)}, Identity: "me",
				Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			store.SetError(c.storeErr)
			defer store.SetError(nil)
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancel {
				cancel()
			}
			defer cancel()
			e.Driver().Attempt(ctx)
			if warned := strings.Contains(buf.String(), `msg="store request failed"`); warned != c.warned {
				t.Errorf("warned: %v, want %v; logged:\n%s", warned, c.warned, buf.String())
			}
		})
	}
}
