package fence

import (
	"errors"
	"strings"
	"testing"
)

// Whatever the sidecar (or something posing as it) sends, parsing returns
// states or errors and never panics.

func FuzzReadEvents(f *testing.F) {
	for _, seed := range []string{
		"data: {\"leader\":false}\n\n",
		": keep-alive\n\ndata: {\"leader\":true,\"token\":1,\"validUntil\":\"2030-01-01T00:00:00Z\"}\n\n",
		"data: a\ndata: b\r\n\r\nevent: x\n\n",
		"data\n\n:\n\x00\n",
		"data: " + strings.Repeat("{", 100) + "\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		err := readEvents(strings.NewReader(string(stream)), func() {}, func(_ string, data []byte) error {
			s, err := decodeState(data)
			if err == nil && s.Leader && s.Token < 1 {
				t.Fatalf("leader with token %d from %q", s.Token, data)
			}
			return nil
		})
		if err == nil {
			t.Fatal("readEvents returned nil")
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	for _, seed := range []string{
		`{"leader":true,"identity":"a","token":3,"validUntil":"2026-11-29T18:45:15.675238Z"}`,
		`{"leader":false,"token":null}`, `{"leader":true}`, `[]`, `null`, `{"leader":true,"token":-1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := decodeState(body)
		switch {
		case err != nil && !errors.Is(err, ErrBadResponse):
			t.Fatalf("error %v does not wrap ErrBadResponse", err)
		case err == nil && s.Leader && (s.Token < 1 || s.ValidUntil.IsZero() || s.Identity == ""):
			t.Fatalf("leader state %+v without token, expiry or identity", s)
		case err == nil && !s.Leader && (s.Token != 0 || !s.ValidUntil.IsZero()):
			t.Fatalf("follower state %+v with a token or expiry", s)
		}
	})
}

// Every line counts as activity, comments included: that is what keeps a
// quiet stream from being dropped for idleness. An event: line names the
// event it is in, and only that one.
func TestReadEventsReportsActivityAndSplitsEvents(t *testing.T) {
	stream := ": keep-alive\n\ndata: one\n\nevent: lost\ndata: two\ndata: lines\n\nid: 3\n\n: keep-alive\n\ndata: three\n\n"
	lines, events := 0, []string{}
	err := readEvents(strings.NewReader(stream), func() { lines++ }, func(name string, data []byte) error {
		events = append(events, name+"="+string(data))
		return nil
	})
	if !errors.Is(err, errEnded) {
		t.Fatalf("readEvents = %v, want errEnded", err)
	}
	if lines != 14 || len(events) != 3 || events[0] != "=one" || events[1] != "lost=two\nlines" || events[2] != "=three" {
		t.Fatalf("%d lines, events %q", lines, events)
	}
	stop := errors.New("stop")
	if err := readEvents(strings.NewReader(stream), func() {}, func(string, []byte) error { return stop }); err != stop {
		t.Fatalf("readEvents = %v, want the event handler's error", err)
	}
}
