package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// IsLoopbackHost reports whether host (an IP address or a name, without a
// port) names this machine's loopback interface: an address in 127.0.0.0/8
// (also as an IPv4-mapped IPv6 address), ::1, or the name localhost. An
// empty host, an unspecified address (0.0.0.0, ::) and every other name or
// address are not loopback.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return addr.Unmap().IsLoopback()
}

// hostOf is the host part of a Host header, with or without a port and
// with the brackets of an IPv6 literal removed.
func hostOf(hostHeader string) string {
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostHeader, "["), "]")
}

// localOnly guards a handler that changes the election (POST). A browser
// on this machine can send such a request to 127.0.0.1 from any web page:
//
//   - cross-origin (a page of another site posting to the API) is refused
//     from the browser's Sec-Fetch-Site and Origin headers;
//   - DNS rebinding (another site's name resolved to 127.0.0.1, so the
//     request looks same-origin) is refused because its Host header names
//     that site: unless anyHost, the Host must be a loopback host.
//
// Clients that are not browsers (curl, the fence client, a proxy) send no
// such headers and a loopback Host, and pass.
func localOnly(h http.Handler, anyHost bool) http.Handler {
	guarded := http.NewCrossOriginProtection().Handler(h)
	if anyHost {
		return guarded
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(hostOf(r.Host)) {
			writeText(w, http.StatusForbidden,
				"this request changes the election and needs a loopback Host header (127.0.0.1, [::1] or localhost), got "+
					quoteHost(r.Host))
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// quoteHost shows a client's Host header in an answer, bounded in length.
func quoteHost(host string) string {
	const limit = 64
	if len(host) > limit {
		return strconv.Quote(host[:limit]) + "..."
	}
	return strconv.Quote(host)
}
