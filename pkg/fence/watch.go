package fence

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Watch follows GET /leader/watch and delivers the sidecar's state at once
// and on every change. It returns an error if the first connection fails.
//
// When the stream later breaks (the sidecar restarts, answers garbage, or
// stays silent past the idle timeout), Watch first delivers a not-leader
// State whose Err wraps ErrDisconnected, since leadership can no longer be
// confirmed, then reconnects with backoff for as long as ctx lives. On a new
// stream the sidecar sends its current state at once.
//
// A leader state whose term does not follow one this Client has delivered
// is delivered as not leader, with Err wrapping ErrTokenRegressed (see
// Client). Like every state, it comes once per event the sidecar sends (a
// change, or the current state on a new stream), never in a loop.
//
// Each state is delivered only after the previous one was received, so
// receive promptly. The channel is closed once ctx is done.
func (c *Client) Watch(ctx context.Context) (<-chan State, error) {
	s, err := c.open(ctx, "/leader/watch")
	if err != nil {
		return nil, err
	}
	out := make(chan State)
	go c.follow(ctx, out, s)
	return out, nil
}

// follow delivers states to out until ctx is done, then closes out. s is an
// open stream, or nil to connect first (a failure is then reported as a
// disconnected state).
func (c *Client) follow(ctx context.Context, out chan<- State, s *stream) {
	defer close(out)
	backoff := c.backoffMin
	var last State
	reported := false // a disconnected state was sent since the last real one
	for {
		var err error
		if s == nil {
			s, err = c.open(ctx, "/leader/watch")
		}
		if s != nil {
			var delivered bool
			delivered, err = c.run(ctx, s, out, &last)
			s = nil
			if delivered {
				backoff, reported = c.backoffMin, false
			}
		}
		if ctx.Err() != nil {
			return
		}
		if !reported {
			lost := State{Identity: last.Identity, Holder: last.Holder, Lease: last.Lease, Backend: last.Backend,
				Err: fmt.Errorf("%w: %w", ErrDisconnected, err)}
			if !send(ctx, out, lost) {
				return
			}
			reported = true
		}
		wait := time.NewTimer(backoff)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return
		}
		backoff = min(2*backoff, c.backoffMax)
	}
}

func send(ctx context.Context, out chan<- State, s State) bool {
	select {
	case out <- s:
		return true
	case <-ctx.Done():
		return false
	}
}

var (
	// errIdle ends a stream that stayed silent past the idle timeout.
	errIdle = errors.New("no event or keep-alive within the idle timeout")
	// errEnded is why a stream that the sidecar closed ended.
	errEnded = errors.New("the sidecar ended the stream")
)

// stream is one open event stream: GET /leader/watch or /shards/watch.
type stream struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *time.Timer // cancels ctx with errIdle when it fires
	body   io.ReadCloser
}

// open opens the event stream at path.
func (c *Client) open(ctx context.Context, path string) (*stream, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	idle := time.AfterFunc(c.idle, func() { cancel(errIdle) })
	fail := func(err error) (*stream, error) {
		idle.Stop()
		cancel(nil)
		return nil, err
	}
	url := c.base + path
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(fmt.Errorf("fence: %w", err))
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.stream.Do(req)
	if err != nil {
		if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil {
			err = cause
		}
		return fail(fmt.Errorf("fence: GET %s: %w", url, err))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		resp.Body.Close()
		return fail(fmt.Errorf("%w: GET %s: status %s, content type %q", ErrBadResponse, url, resp.Status, mt))
	}
	return &stream{ctx: sctx, cancel: cancel, idle: idle, body: resp.Body}, nil
}

// run reads s until it ends, delivering each state to out and remembering
// it in last; it reports whether any was delivered and why the stream ended.
func (c *Client) run(ctx context.Context, s *stream, out chan<- State, last *State) (delivered bool, err error) {
	defer func() {
		s.idle.Stop()
		s.body.Close()
		s.cancel(nil)
	}()
	err = readEvents(s.body, func() { s.idle.Reset(c.idle) }, func(_ string, data []byte) error {
		// Every event of /leader/watch is a state, whatever its name.
		st, err := decodeState(data)
		if err != nil {
			return err
		}
		st = c.admit(st)
		s.idle.Stop() // a slow receiver is not a silent sidecar
		ok := send(ctx, out, st)
		s.idle.Reset(c.idle)
		if !ok {
			return ctx.Err()
		}
		*last, delivered = st, true
		return nil
	})
	if cause := context.Cause(s.ctx); cause != nil && ctx.Err() == nil {
		err = cause
	}
	return delivered, err
}

// readEvents parses a Server-Sent Events stream: "data:" lines are joined
// into an event, an "event:" line names it, a blank line dispatches it to
// event with its name ("" for an unnamed event), lines starting with ":"
// are comments, other fields are ignored. active is called on every
// line. A line or an event longer than maxBody ends the stream with
// ErrBadResponse. It returns why the stream ended, errEnded if it simply
// ended.
func readEvents(r io.Reader, active func(), event func(name string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxBody)
	var data []byte
	name := ""
	pending := false
	for sc.Scan() {
		active()
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if pending {
				if err := event(name, data); err != nil {
					return err
				}
			}
			data, name, pending = data[:0], "", false
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "event" {
				name = string(bytes.TrimPrefix(value, []byte(" ")))
				continue
			}
			if string(field) != "data" {
				continue
			}
			if pending {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(value, []byte(" "))...)
			if len(data) > maxBody {
				return fmt.Errorf("%w: event stream event larger than %d bytes", ErrBadResponse, maxBody)
			}
			pending = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: event stream line longer than %d bytes", ErrBadResponse, maxBody)
		}
		return err
	}
	return errEnded
}
