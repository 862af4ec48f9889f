package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestShortIPv4(t *testing.T) {
	cases := []struct {
		host, want string // want "" when host is not a short form
	}{
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.1.2", "10.1.0.2"},
		{"10.65536", "10.1.0.0"},
		{"2130706433", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"127.0.0.1", ""}, // the full form
		{"256.1", ""},
		{"127.16777216", ""},
		{"1.256.1", ""},
		{"1.1.65536", ""},
		{"4294967296", ""},
		{"127.", ""},
		{".1", ""},
		{"127.1a", ""},
		{"0x7f.1", ""},
		{"0177.1", ""}, // octal to inet_aton
		{"+127.1", ""},
		{"localhost", ""},
		{"", ""},
		{"::1", ""},
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			addr, ok := ShortIPv4(c.host)
			got := ""
			if ok {
				got = addr.String()
			}
			if got != c.want {
				t.Fatalf("ShortIPv4(%q) = %q, %v; want %q", c.host, got, ok, c.want)
			}
		})
	}
}

func TestIsLoopbackHost(t *testing.T) {
	cases := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"localhost", true},
		{"LocalHost", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.7", false},
		{"128.0.0.1", false},
		{"::2", false},
		{"localhost.", false},
		{"localhost.example.com", false},
		{"my-pod", false},
		{"[::1]", false}, // a host, not a Host header: no brackets
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			if got := IsLoopbackHost(c.host); got != c.want {
				t.Fatalf("IsLoopbackHost(%q) = %v, want %v", c.host, got, c.want)
			}
		})
	}
}

// TestReleaseNeedsALoopbackHost sends POST /leader/release as a browser
// tricked by DNS rebinding (a foreign Host), as a cross-origin page, and as
// ordinary local clients, and checks which ones release.
func TestReleaseNeedsALoopbackHost(t *testing.T) {
	cases := []struct {
		name    string
		host    string
		headers map[string]string
		anyHost bool
		want    int
	}{
		{"IPv4 loopback with port", "127.0.0.1:4040", nil, false, 200},
		{"IPv4 loopback without port", "127.0.0.1", nil, false, 200},
		{"another 127/8 address", "127.0.0.2:4040", nil, false, 200},
		{"IPv6 loopback", "[::1]:4040", nil, false, 200},
		{"IPv6 loopback without port", "[::1]", nil, false, 200},
		{"localhost", "localhost:4040", nil, false, 200},
		{"rebound name", "attacker.example:4040", nil, false, 403},
		{"pod IP", "10.1.2.3:4040", nil, false, 403},
		{"unspecified", "0.0.0.0:4040", nil, false, 403},
		{"no Host", "", nil, false, 403},
		{"pod IP, any host allowed", "10.1.2.3:4040", nil, true, 200},
		{"same-origin browser", "127.0.0.1:4040", map[string]string{"Sec-Fetch-Site": "same-origin"}, false, 200},
		{"cross-site browser", "127.0.0.1:4040", map[string]string{"Sec-Fetch-Site": "cross-site"}, false, 403},
		{"cross-site browser, any host allowed", "10.1.2.3:4040", map[string]string{"Sec-Fetch-Site": "cross-site"}, true, 403},
		{"foreign Origin", "127.0.0.1:4040", map[string]string{"Origin": "https://attacker.example"}, false, 403},
		{"own Origin", "127.0.0.1:4040", map[string]string{"Origin": "http://127.0.0.1:4040"}, false, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(leading(4, time.Minute))
			req := httptest.NewRequest("POST", "/leader/release", nil)
			req.Host = c.host
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			NewAppHandler(f, testInfo, Options{AnyHost: c.anyHost}).ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			wantReleases := 0
			if c.want == 200 {
				wantReleases = 1
			}
			if f.Releases() != wantReleases {
				t.Fatalf("%d releases, want %d", f.Releases(), wantReleases)
			}
		})
	}
}

func TestForeignHostIsNamedAndBounded(t *testing.T) {
	f := newFake(leading(4, time.Minute))
	req := httptest.NewRequest("POST", "/leader/release", nil)
	req.Host = strings.Repeat("a", 300) + ".example"
	rec := httptest.NewRecorder()
	NewAppHandler(f, testInfo, Options{}).ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != 403 || !strings.Contains(body, "loopback Host header") || len(body) > 250 {
		t.Fatalf("status %d, body %q", rec.Code, body)
	}
}

func TestReadsDoNotCheckTheHost(t *testing.T) {
	f := newFake(leading(4, time.Minute))
	req := httptest.NewRequest("GET", "/leader", nil)
	req.Host = "10.1.2.3:4040"
	rec := httptest.NewRecorder()
	NewAppHandler(f, testInfo, Options{}).ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /leader with a pod-IP Host: %d", rec.Code)
	}
}
