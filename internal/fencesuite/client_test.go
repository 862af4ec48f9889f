package fencesuite_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leader-sidecar/leader-sidecar/pkg/fence"
	"github.com/leader-sidecar/leader-sidecar/pkg/httpapi"
)

// answer serves GET /leader with a fixed status and body.
func answer(code int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	})
}

func TestStateDecodes(t *testing.T) {
	valid := time.Date(2026, 11, 29, 18, 45, 15, 675238000, time.UTC)
	cases := map[string]struct {
		body string
		want fence.State
	}{
		"leader": {
			`{"leader":true,"identity":"web_1","holder":"web_1","token":3,"validUntil":"2026-11-29T18:45:15.675238Z","lease":"default/billing","backend":"lease"}`,
			fence.State{Leader: true, Identity: "web_1", Holder: "web_1", Token: 3, ValidUntil: valid, Lease: "default/billing", Backend: "lease"},
		},
		"follower": {
			`{"leader":false,"identity":"web_2","holder":"web_1","token":null,"validUntil":null,"lease":"default/billing","backend":"lease"}`,
			fence.State{Identity: "web_2", Holder: "web_1", Lease: "default/billing", Backend: "lease"},
		},
		"follower with stray token": {`{"leader":false,"token":9,"validUntil":"2026-11-29T18:45:15Z"}`, fence.State{}},
		"unknown fields":            {`{"leader":false,"holder":"h","error":"x","new":[1]}`, fence.State{Holder: "h"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sc := newScriptedSidecar(t, nil, answer(http.StatusOK, c.body))
			got, err := sc.client.State(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !got.ValidUntil.Equal(c.want.ValidUntil) {
				t.Fatalf("ValidUntil %v, want %v", got.ValidUntil, c.want.ValidUntil)
			}
			got.ValidUntil = c.want.ValidUntil
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestStateRejectsUnusableAnswers(t *testing.T) {
	cases := map[string]http.Handler{
		"503":                     answer(http.StatusServiceUnavailable, `{"leader":true,"token":1}`),
		"404":                     http.NotFoundHandler(),
		"empty":                   answer(http.StatusOK, ""),
		"HTML":                    answer(http.StatusOK, "<html>proxy error</html>"),
		"truncated":               answer(http.StatusOK, `{"leader":true,"token":`),
		"no leader field":         answer(http.StatusOK, `{"token":3}`),
		"leader without token":    answer(http.StatusOK, `{"leader":true,"identity":"a","token":null,`+until+`}`),
		"leader with token 0":     answer(http.StatusOK, `{"leader":true,"identity":"a","token":0,`+until+`}`),
		"fractional token":        answer(http.StatusOK, `{"leader":true,"identity":"a","token":1.5,`+until+`}`),
		"huge token":              answer(http.StatusOK, `{"leader":true,"identity":"a","token":99999999999999999999,`+until+`}`),
		"leader without identity": answer(http.StatusOK, `{"leader":true,"token":1,`+until+`}`),
		"leader is a string":      answer(http.StatusOK, `{"leader":"true","token":1,`+until+`}`),
		"trailing garbage":        answer(http.StatusOK, `{"leader":false} x`),
		"too large":               answer(http.StatusOK, `{"leader":false,"holder":"`+strings.Repeat("h", 70<<10)+`"}`),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			sc := newScriptedSidecar(t, nil, h)
			s, err := sc.client.State(t.Context())
			if !errors.Is(err, fence.ErrBadResponse) || s.Leader {
				t.Fatalf("State = %+v, %v; want ErrBadResponse", s, err)
			}
		})
	}
}

func TestStateFailsWhenTheSidecarDoesNotAnswer(t *testing.T) {
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c, err := fence.NewClient(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := c.State(t.Context()); err == nil || s.Leader {
			t.Fatalf("State = %+v, %v; want an error", s, err)
		}
	})
	t.Run("hangs past the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sc := newScriptedSidecar(t, nil, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
			start := time.Now()
			if s, err := sc.client.State(t.Context()); err == nil || s.Leader {
				t.Fatalf("State = %+v, %v; want an error", s, err)
			}
			if waited := time.Since(start); waited != 2*time.Second {
				t.Errorf("gave up after %v, want the client's 2s timeout", waited)
			}
		})
	})
}

func TestStateOverHTTP(t *testing.T) {
	e := newElector(leading(3, time.Hour))
	srv := httptest.NewServer(httpapi.NewAppHandler(e, info, httpapi.Options{}))
	defer srv.Close()
	c, err := fence.NewClient(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	s, err := c.State(t.Context())
	if err != nil || !s.Leader || s.Token != 3 || !s.ValidUntil.Equal(e.Status().ValidUntil) || s.Backend != "lease" {
		t.Fatalf("State = %+v, %v; want leader with token 3", s, err)
	}
}

func TestNewClientChecksItsArguments(t *testing.T) {
	for _, u := range []string{"127.0.0.1:4040", "ftp://127.0.0.1", "http://", "http://h/?x=1", "://"} {
		if _, err := fence.NewClient(u); err == nil {
			t.Errorf("NewClient(%q) succeeded", u)
		}
	}
	for name, o := range map[string]fence.Option{
		"idle 0":           fence.WithIdleTimeout(0),
		"backoff 0":        fence.WithReconnectBackoff(0, time.Second),
		"backoff inverted": fence.WithReconnectBackoff(time.Second, time.Millisecond),
	} {
		if _, err := fence.NewClient("", o); err == nil {
			t.Errorf("%s: NewClient succeeded", name)
		}
	}
	if _, err := fence.NewClient(""); err != nil {
		t.Errorf("NewClient(\"\"): %v", err)
	}
}
