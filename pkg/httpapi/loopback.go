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

// ShortIPv4 reports whether host is an IPv4 address in one of the short
// decimal forms that inet_aton, and so curl and Python, accept ("127.1"
// is 127.0.0.1, "10.1.2" is 10.1.0.2, "2130706433" is 127.0.0.1), and
// returns it in full. Go's resolver without cgo, which the sidecar's
// binaries use, takes such a host for a name to look up, and finds none:
// the checks of addresses and URLs refuse it, naming the full form.
func ShortIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 3 {
		return netip.Addr{}, false
	}
	var n [3]uint64
	for i, p := range parts {
		// A leading 0 makes a part octal to inet_aton: not taken here.
		if p == "" || strings.Trim(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		n[i] = v
	}
	// Every part but the last is one byte; the last fills the rest.
	var v uint64
	for i := range len(parts) - 1 {
		if n[i] > 0xff {
			return netip.Addr{}, false
		}
		v = v<<8 | n[i]
	}
	rest := uint(32 - 8*(len(parts)-1))
	last := n[len(parts)-1]
	if last >= 1<<rest {
		return netip.Addr{}, false
	}
	v = v<<rest | last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
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
