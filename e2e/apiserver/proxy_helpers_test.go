package apiserver

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// watchCountingProxy forwards plain HTTP to the API server of cfg with
// cfg's credentials, and counts the watch requests of Leases (opened, and
// open now) and their list requests. A sidecar reaches it through
// kubeconfig(). With refuseStreaming set it answers a watch that asks for
// its initial state (sendInitialEvents) as an API server that cannot
// stream it does, with 400 Bad Request.
type watchCountingProxy struct {
	addr            string
	opened, open    atomic.Int64
	lists           atomic.Int64
	refuseStreaming atomic.Bool
}

// newWatchCountingProxy listens on a free loopback port until the test
// ends.
func newWatchCountingProxy(t *testing.T, cfg *rest.Config) *watchCountingProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if target.Scheme == "" {
		target, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			t.Fatal(err)
		}
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &watchCountingProxy{addr: ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !strings.HasSuffix(r.URL.Path, "/leases"):
		case r.URL.Query().Get("watch") == "true" && r.URL.Query().Get("sendInitialEvents") == "true" && p.refuseStreaming.Load():
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,`+
				`"message":"sendInitialEvents is not supported (refused by the test proxy)"}`)
			return
		case r.URL.Query().Get("watch") == "true":
			p.opened.Add(1)
			p.open.Add(1)
			defer p.open.Add(-1)
		case r.Method == http.MethodGet:
			p.lists.Add(1)
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// kubeconfig writes a kubeconfig whose server is the proxy.
func (p *watchCountingProxy) kubeconfig(t *testing.T) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + p.addr}
	c.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	c.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	c.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}
