package natstest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP relay between clients and one address, for partition tests with real
// sockets. Paused, it stops moving bytes in both directions without closing anything: a
// silent network black hole (TCP keeps the bytes; they flow again on Resume unless a side gave
// up meanwhile). Cut closes every relayed connection (a partition the peers notice).
//
// Concurrency: all methods are safe for concurrent use. Close ends the listener and every
// connection; it is registered with t.Cleanup by NewProxy.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	resume chan struct{} // closed on Resume; replaced on Pause (guarded by mu)
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy relays 127.0.0.1:<random> to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, resume: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resume)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL is the nats:// URL clients dial instead of the target.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Pause starts a black hole: no byte moves until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Resume ends a black hole.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Cut closes every relayed connection (new ones are still accepted).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	if p.paused {
		p.paused = false
		close(p.resume)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding every chunk while paused.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.resume
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: close both sides
			return
		}
	}
}
