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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// tcpProxy forwards every connection made to it to upstream, byte for
// byte (TLS passes through untouched). cut() severs the path: it closes
// every open connection and holds new ones, accepted but never forwarded,
// as a network partition would (the client's requests hang rather than
// fail fast). heal() forwards again and closes the held connections, so
// the client dials anew. stall() makes the open connections silently dead
// (the bytes sent on them are read and dropped, both ways, and nothing is
// closed), as a dropped NAT entry or a dead peer would, while new
// connections forward as before; unstall() closes the stalled ones.
type tcpProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	isCut bool
	links map[*link]struct{}    // every forwarded connection
	held  map[net.Conn]struct{} // accepted while cut

	forwarded, heldCount, dialFailed, stalledCount atomic.Int64
	wg                                             sync.WaitGroup
}

// link is one forwarded connection: the client's end and the upstream's.
type link struct {
	client, upstream net.Conn
	stalled          atomic.Bool // bytes read on either end are dropped
}

// newProxy listens on a free loopback port and forwards to upstream
// (host:port) until the test ends.
func newProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.isCut {
			p.held[c] = struct{}{}
			p.heldCount.Add(1)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
	if err != nil { // the API server is down: the client sees a reset
		p.dialFailed.Add(1)
		c.Close()
		return
	}
	p.mu.Lock()
	if p.isCut { // cut while dialling
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	lk := &link{client: c, upstream: u}
	p.links[lk] = struct{}{}
	p.mu.Unlock()
	p.forwarded.Add(1)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			lk.close()
			p.mu.Lock()
			delete(p.links, lk)
			p.mu.Unlock()
		})
	}
	var pair sync.WaitGroup
	pair.Go(func() { lk.pipe(u, c); closeBoth() })
	pair.Go(func() { lk.pipe(c, u); closeBoth() })
	pair.Wait()
}

// pipe copies src to dst until either fails; once the link is stalled it
// reads and drops what src sends, until src is closed.
func (lk *link) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !lk.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close closes both ends.
func (lk *link) close() {
	lk.client.Close()
	lk.upstream.Close()
}

// stall makes every open connection silently dead; new ones forward.
func (p *tcpProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for lk := range p.links {
		lk.stalled.Store(true)
		p.stalledCount.Add(1)
	}
}

// unstall closes the stalled connections.
func (p *tcpProxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for lk := range p.links {
		if lk.stalled.Load() {
			lk.close()
		}
	}
}

// cut closes every open connection and holds new ones until heal.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for lk := range p.links {
		lk.close()
	}
}

// heal forwards new connections again and closes the held ones.
func (p *tcpProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	for c := range p.held {
		c.Close()
		delete(p.held, c)
	}
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.isCut = true
	for lk := range p.links {
		lk.close()
	}
	for c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

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
