package sidecartest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Watch is one open GET /leader/watch, read in the background.
type Watch struct {
	body  io.ReadCloser
	ended chan struct{}
	err   error // why the stream ended, set before ended is closed
}

// OpenWatch opens GET /leader/watch on base (such as http://127.0.0.1:4040)
// with hc, and calls event with the data of each event, numbered from 1,
// in order, from a goroutine of its own, until the stream ends. An answer
// other than 200 is an error.
func OpenWatch(ctx context.Context, hc *http.Client, base string, event func(n int, data string)) (*Watch, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/leader/watch", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	w := &Watch{body: resp.Body, ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		r := bufio.NewReader(resp.Body)
		for n := 0; ; {
			line, err := r.ReadString('\n')
			if err != nil {
				w.err = err
				return
			}
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				n++
				event(n, data)
			}
		}
	}()
	return w, nil
}

// Ended is closed once the stream has ended.
func (w *Watch) Ended() <-chan struct{} { return w.ended }

// Err is why the stream ended; valid once Ended is closed.
func (w *Watch) Err() error { return w.err }

// Close ends the stream.
func (w *Watch) Close() error { return w.body.Close() }
