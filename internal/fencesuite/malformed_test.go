package fencesuite_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
)

// rawStream answers /leader/watch with body as an event stream, then holds
// the stream open.
func rawStream(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fmt.Fprint(w, body)
		<-r.Context().Done()
	})
}

const until = `"validUntil":"2030-01-01T00:00:00Z"`

func TestWatchReportsMalformedEvents(t *testing.T) {
	cases := map[string]string{
		"not JSON":                "data: {not json\n\n",
		"JSON array":              "data: []\n\n",
		"no leader field":         `data: {"holder":"a"}` + "\n\n",
		"leader without token":    `data: {"leader":true,"identity":"a",` + until + "}\n\n",
		"leader with token 0":     `data: {"leader":true,"identity":"a","token":0,` + until + "}\n\n",
		"negative token":          `data: {"leader":true,"identity":"a","token":-4,` + until + "}\n\n",
		"token as a string":       `data: {"leader":true,"identity":"a","token":"4",` + until + "}\n\n",
		"leader without expiry":   `data: {"leader":true,"identity":"a","token":4}` + "\n\n",
		"bad validUntil":          `data: {"leader":true,"identity":"a","token":4,"validUntil":"tomorrow"}` + "\n\n",
		"leader without identity": `data: {"leader":true,"token":4,` + until + "}\n\n",
		"two values":              `data: {"leader":false} {"leader":true}` + "\n\n",
		"empty data":              "data\n\n",
		"line too long":           "data: " + strings.Repeat("x", 70<<10) + "\n\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newScriptedSidecar(t, nil, rawStream(body))
				states, err := sc.client.Watch(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				s := receive(t, states)
				if s.Leader || !errors.Is(s.Err, fence.ErrBadResponse) || !errors.Is(s.Err, fence.ErrDisconnected) {
					t.Fatalf("state %+v, want not leader, ErrBadResponse and ErrDisconnected", s)
				}
			})
		})
	}
}

func TestWatchParsesEventStreamSyntax(t *testing.T) {
	cases := map[string]string{
		"comments and other fields": ": hello\nevent: state\nid: 7\nretry: 100\ndata: {\"leader\":false,\"holder\":\"h\"}\n\n",
		"CRLF line ends":            "data: {\"leader\":false,\"holder\":\"h\"}\r\n\r\n",
		"data over two lines":       "data: {\"leader\":false,\ndata: \"holder\":\"h\"}\n\n",
		"no space after the colon":  "data:{\"leader\":false,\"holder\":\"h\"}\n\n",
		"unknown JSON fields":       "data: {\"leader\":false,\"holder\":\"h\",\"term\":{\"x\":1}}\n\n",
		"blank lines and garbage":   "\n\n\x00\xff\n:\n\ndata: {\"leader\":false,\"holder\":\"h\"}\n\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newScriptedSidecar(t, nil, rawStream(body))
				states, err := sc.client.Watch(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if s := receive(t, states); s.Err != nil || s.Leader || s.Holder != "h" {
					t.Fatalf("state %+v, want a follower of h", s)
				}
				nothingPending(t, states)
			})
		})
	}
}

func TestWatchFailsIfTheFirstConnectionFails(t *testing.T) {
	cases := []struct {
		name    string
		handler http.Handler
		down    error
		bad     bool
	}{
		{name: "sidecar down", down: errors.New("connection refused")},
		{name: "404", handler: http.NotFoundHandler(), bad: true},
		{name: "JSON instead of events", bad: true, handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"leader":true}`)
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newScriptedSidecar(t, nil, c.handler)
				sc.setDown(c.down)
				states, err := sc.client.Watch(t.Context())
				if err == nil || states != nil || errors.Is(err, fence.ErrBadResponse) != c.bad {
					t.Fatalf("Watch: %v, %v; want an error (ErrBadResponse: %v)", states, err, c.bad)
				}
			})
		})
	}
}

func TestWatchClosesItsChannelWhenDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newSidecar(t, following("x"))
		ctx, cancel := context.WithCancel(t.Context())
		states, err := sc.client.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		receive(t, states)
		cancel()
		synctest.Wait()
		if s, ok := <-states; ok {
			t.Fatalf("state %+v after cancel, want the channel closed", s)
		}
	})
}
