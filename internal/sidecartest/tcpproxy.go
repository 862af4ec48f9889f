package sidecartest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TCPProxy forwards every connection made to it to upstream, byte for
// byte (TLS passes through untouched). Cut severs the path: it closes
// every open connection and holds new ones, accepted but never forwarded,
// as a network partition would (the client's requests hang rather than
// fail fast). Heal forwards again and closes the held connections, so
// the client dials anew. Stall makes the open connections silently dead
// (the bytes sent on them are read and dropped, both ways, and nothing is
// closed), as a dropped NAT entry or a dead peer would, while new
// connections forward as before; Unstall closes the stalled ones. Slow
// delays every chunk of bytes forwarded, both ways, as a slow or distant
// store would.
type TCPProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	isCut bool
	links map[*link]struct{}    // every forwarded connection
	held  map[net.Conn]struct{} // accepted while cut

	// Connections forwarded, held while cut, whose upstream dial failed,
	// and stalled.
	Forwarded, Held, DialFailed, Stalled atomic.Int64
	delay                                atomic.Int64 // Slow's, in nanoseconds
	wg                                   sync.WaitGroup
}

// link is one forwarded connection: the client's end and the upstream's.
type link struct {
	client, upstream net.Conn
	stalled          atomic.Bool // bytes read on either end are dropped
	delay            *atomic.Int64
}

// NewTCPProxy listens on a free loopback port and forwards to upstream
// (host:port, or the path of a Unix socket) until the test ends.
func NewTCPProxy(t testing.TB, upstream string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}, held: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

func (p *TCPProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.isCut {
			p.held[c] = struct{}{}
			p.Held.Add(1)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *TCPProxy) forward(c net.Conn) {
	network := "tcp"
	if strings.HasPrefix(p.upstream, "/") {
		network = "unix"
	}
	u, err := net.DialTimeout(network, p.upstream, 2*time.Second)
	if err != nil { // the upstream is down: the client sees a reset
		p.DialFailed.Add(1)
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
	lk := &link{client: c, upstream: u, delay: &p.delay}
	p.links[lk] = struct{}{}
	p.mu.Unlock()
	p.Forwarded.Add(1)
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
			if d := lk.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
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

// Stall makes every open connection silently dead; new ones forward.
func (p *TCPProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for lk := range p.links {
		lk.stalled.Store(true)
		p.Stalled.Add(1)
	}
}

// Unstall closes the stalled connections.
func (p *TCPProxy) Unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for lk := range p.links {
		if lk.stalled.Load() {
			lk.close()
		}
	}
}

// Slow delays every chunk forwarded from now on by d, both ways, on open
// connections and new ones; 0 forwards at once again.
func (p *TCPProxy) Slow(d time.Duration) { p.delay.Store(int64(d)) }

// Cut closes every open connection and holds new ones until heal.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for lk := range p.links {
		lk.close()
	}
}

// Heal forwards new connections again and closes the held ones.
func (p *TCPProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	for c := range p.held {
		c.Close()
		delete(p.held, c)
	}
}

func (p *TCPProxy) close() {
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
