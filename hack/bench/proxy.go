package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// countingProxy stands between one candidate and the API server: the
// candidate talks plain HTTP on loopback to it, it forwards over TLS with
// the admin's credentials and counts every request, so each request is
// attributed to exactly one candidate.
type countingProxy struct {
	srv                    *http.Server
	addr                   string
	reads, writes, watches atomic.Int64
	openWatches            atomic.Int64 // watch requests started and not yet ended
}

type counts struct{ Reads, Writes, Watches int64 }

func (c counts) total() int64 { return c.Reads + c.Writes + c.Watches }

func (c counts) sub(o counts) counts {
	return counts{c.Reads - o.Reads, c.Writes - o.Writes, c.Watches - o.Watches}
}

func (c counts) add(o counts) counts {
	return counts{c.Reads + o.Reads, c.Writes + o.Writes, c.Watches + o.Watches}
}

func (p *countingProxy) snapshot() counts {
	return counts{p.reads.Load(), p.writes.Load(), p.watches.Load()}
}

func newProxy(cfg *rest.Config) (*countingProxy, error) {
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	target, err := url.Parse(host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{addr: ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch w := r.URL.Query().Get("watch"); {
		case w == "true" || w == "1":
			p.watches.Add(1)
			p.openWatches.Add(1)
			defer p.openWatches.Add(-1)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			p.reads.Add(1)
		default:
			p.writes.Add(1)
		}
		if os.Getenv("BENCH_PROXY_LOG") != "" {
			fmt.Fprintln(os.Stderr, "proxy", p.addr, r.Method, r.URL.String())
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *countingProxy) close() { _ = p.srv.Close() }

// kubeconfig writes a kubeconfig that points at the proxy.
func (p *countingProxy) kubeconfig(dir string) (string, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["bench"] = &clientcmdapi.Cluster{Server: "http://" + p.addr}
	c.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	c.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	c.CurrentContext = "bench"
	f, err := os.CreateTemp(dir, "kubeconfig-*")
	if err != nil {
		return "", err
	}
	f.Close()
	path := filepath.Join(dir, filepath.Base(f.Name()))
	return path, clientcmd.WriteToFile(*c, path)
}
