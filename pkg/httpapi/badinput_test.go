package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The app API under hostile or broken clients: malformed requests, huge
// bodies, hundreds of watchers and watchers that stop reading. None of them
// may crash the server, hold a goroutine forever or slow GET /leader down.

func TestBadInputMalformedRequests(t *testing.T) {
	f := newFake(leading(7, time.Hour))
	srv, _, _, errLog := newServer(t, f, testInfo, Options{}, 0)
	addr := srv.Listener.Addr().String()
	long := strings.Repeat("a", 2<<20) // above net/http's 1 MiB header limit
	cases := []struct {
		name, req string
		code      int
	}{
		{"garbage request line", "GARBAGE\r\n\r\n", 400},
		{"binary garbage", "\x00\xff\xfe\x01 / \x7f\r\n\r\n", 400},
		{"no protocol version", "GET /leader\r\n\r\n", 400},
		{"unknown protocol version", "GET /leader HTTP/9.9\r\nHost: x\r\n\r\n", 505},
		{"no Host header", "GET /leader HTTP/1.1\r\n\r\n", 400},
		{"unknown method", "BREW /leader HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"method with invalid characters", "G(T /leader HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"header without a colon", "GET /leader HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"header name with a space", "GET /leader HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400},
		{"NUL in a header value", "GET /leader HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400},
		{"negative Content-Length", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"Content-Length not a number", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n", 400},
		{"two different Content-Lengths", "POST /leader/release HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"unsupported Transfer-Encoding", "POST /leader/release HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"very long URL", "GET /leader?" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 431},
		{"very long header", "GET /leader HTTP/1.1\r\nHost: x\r\nX-Long: " + long + "\r\n\r\n", 431},
		{"very many headers", "GET /leader HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-N: v\r\n", 200_000) + "\r\n", 431},
		{"wrong method on release", "GET /leader/release HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"unknown path", "GET /etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"dot segments are cleaned by a redirect", "GET /leader/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 307},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, c.req)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, c.code)
			}
		})
	}
	if f.Releases() != 0 {
		t.Fatalf("malformed requests released the lease %d times", f.Releases())
	}
	if m := getLeader(t, srv.Client(), srv.URL); m["leader"] != true || m["token"] != float64(7) {
		t.Fatalf("after the malformed requests GET /leader answered %v", m)
	}
	if s := errLog.String(); strings.Contains(s, "panic") {
		t.Fatalf("the server logged a panic:\n%s", s)
	}
}

// The answers are compared whole, so time stands still (synctest) and
// validForMs is the same in each.
func TestBadInputQueryStringsAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(leading(7, time.Hour))
		h := NewAppHandler(f, testInfo, Options{})
		want := serve(h, "GET", "/leader").Body.String()
		for _, q := range []string{"?leader=false&token=99", "?token", "?%zz", "?" + strings.Repeat("x=1&", 10000)} {
			rec := serve(h, "GET", "/leader"+q)
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 200 || m["leader"] != true || m["token"] != float64(7) {
				t.Fatalf("GET /leader%.40s: %d %q", q, rec.Code, rec.Body)
			}
			if rec.Body.String() != want {
				t.Fatalf("GET /leader%.40s answered %q, GET /leader %q", q, rec.Body, want)
			}
			if rec := serve(h, "GET", "/leader/ready"+q); rec.Code != 200 {
				t.Fatalf("GET /leader/ready%.40s: %d", q, rec.Code)
			}
		}
		if rec := serve(h, "POST", "/leader/release?holdOff=0s&leader=true"); rec.Code != 200 || f.Releases() != 1 {
			t.Fatalf("POST /leader/release with a query: %d after %d releases", rec.Code, f.Releases())
		}
	})
}

// A release with a huge body is answered at once, without reading the body:
// the handler never touches it, and net/http hangs up rather than drain more
// than a little of it. This is measured on the server's side of the
// connection (bytes read, counted by the listener) and on the client's (the
// answer arrives while it is still sending), rather than by the handler's
// allocations, which a concurrent server makes too noisy to bound tightly.
func TestBadInputHugeReleaseBody(t *testing.T) {
	const size = 50 << 20
	for _, framing := range []string{"Content-Length: " + fmt.Sprint(size), "Transfer-Encoding: chunked"} {
		t.Run(strings.Fields(framing)[0], func(t *testing.T) {
			f := newFake(leading(4, time.Hour))
			srv, _, ln, _ := newServer(t, f, testInfo, Options{}, 0)
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, "POST /leader/release HTTP/1.1\r\nHost: 127.0.0.1\r\n"+framing+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			var sent atomic.Int64
			writeErr := make(chan error, 1)
			go func() {
				chunk := bytes.Repeat([]byte("x"), 64<<10)
				if strings.HasPrefix(framing, "Transfer") {
					chunk = append(fmt.Appendf(nil, "%x\r\n", len(chunk)), append(chunk, "\r\n"...)...)
				}
				for sent.Load() < size {
					n, err := c.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						writeErr <- err
						return
					}
				}
				writeErr <- nil
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to the release: %v", err)
			}
			sentAtAnswer := sent.Load()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if resp.StatusCode != 200 || m["leader"] != false || f.Releases() != 1 {
				t.Fatalf("release answered %d %v after %d releases", resp.StatusCode, m, f.Releases())
			}
			if sentAtAnswer >= size {
				t.Fatalf("the answer came only after the whole %d-byte body was sent", size)
			}
			if err := <-writeErr; err == nil {
				t.Fatalf("the server accepted all %d bytes of a body nobody reads", size)
			}
			read := ln.read.Load()
			t.Logf("answered after the client sent %d KiB; the server read %d KiB of %d MiB; the sender then failed",
				sentAtAnswer>>10, read>>10, size>>20)
			if read > 2<<20 {
				t.Fatalf("the server read %d bytes of a body nobody uses", read)
			}
		})
	}
}
