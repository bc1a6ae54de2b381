// Package tcpproxy is a byte-level TCP relay for fault tests with real sockets (NATS clients,
// ZMQ SUB/PUB pairs). It knows no protocol: it forwards bytes and closes connections. Only
// test code imports it.
package tcpproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy relays connections from its own loopback port to one target address, dialling the
// target once per accepted connection (so after a target restart the next connection reaches
// the new process). It has two faults, both ended by Resume:
//
//   - Pause is a silent black hole: no byte moves in either direction and nothing is closed (TCP
//     keeps the bytes; they flow again on Resume unless a side gave up meanwhile). Peers notice
//     only by their own timeouts (NATS pings, replication heartbeats).
//   - Sever closes every relayed connection and, until Resume, closes each new one as soon as
//     it is accepted: the peer is gone, and a ZMQ PUB has no subscriber, so it drops what it
//     publishes, as libzmq does when the subscriber leaves.
//
// Concurrency: all methods are safe for concurrent use; mu guards the fault state and conns.
// Close ends the listener and every connection; New registers it with t.Cleanup.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	paused  bool
	resume  chan struct{} // closed while not paused; replaced on Pause
	severed bool
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// New relays 127.0.0.1:<random> to target ("host:port") until the test ends.
func New(t testing.TB, target string) *Proxy {
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

// Addr is the proxy's "host:port"; clients dial it instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is Addr as a nats:// URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Endpoint is Addr as a ZMQ tcp:// endpoint.
func (p *Proxy) Endpoint() string { return "tcp://" + p.Addr() }

// Pause starts a black hole: no byte moves until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Sever closes every relayed connection and refuses new ones until Resume.
func (p *Proxy) Sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severed = true
	p.closeConns()
}

// Resume ends a Pause or a Sever.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severed = false
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	p.closeConns()
	p.mu.Unlock()
	p.Resume()
	p.wg.Wait()
}

// closeConns closes every relayed connection; mu is held.
func (p *Proxy) closeConns() {
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refusing() {
			_ = c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, u) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

func (p *Proxy) refusing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.severed || p.closed
}

// track registers a relayed pair, or closes it when a Sever or Close ran while dialling (so no
// pair escapes them).
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		if p.severed || p.closed {
			_ = c.Close()
		} else {
			p.conns[c] = struct{}{}
		}
	}
	return !p.severed && !p.closed
}

// pipe copies src to dst, holding every chunk while paused; when either side ends both close.
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
