package apiserver

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpProxy forwards every connection made to it to upstream, byte for
// byte (TLS passes through untouched). cut() severs the path: it closes
// every open connection and holds new ones, accepted but never forwarded,
// as a network partition would (the client's requests hang rather than
// fail fast). heal() forwards again and closes the held connections, so
// the client dials anew.
type tcpProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	isCut bool
	open  map[net.Conn]struct{} // both ends of every forwarded connection
	held  map[net.Conn]struct{} // accepted while cut

	forwarded, heldCount, dialFailed atomic.Int64
	wg                               sync.WaitGroup
}

// newProxy listens on a free loopback port and forwards to upstream
// (host:port) until the test ends.
func newProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, upstream: upstream, open: map[net.Conn]struct{}{}, held: map[net.Conn]struct{}{}}
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
	p.open[c], p.open[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	p.forwarded.Add(1)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			c.Close()
			u.Close()
			p.mu.Lock()
			delete(p.open, c)
			delete(p.open, u)
			p.mu.Unlock()
		})
	}
	var pair sync.WaitGroup
	pair.Go(func() { _, _ = io.Copy(u, c); closeBoth() })
	pair.Go(func() { _, _ = io.Copy(c, u); closeBoth() })
	pair.Wait()
}

// cut closes every open connection and holds new ones until heal.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for c := range p.open {
		c.Close()
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
	for c := range p.open {
		c.Close()
	}
	for c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
