package integration

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// A byte-level TCP proxy that lets the KV-event tests cut a listener's connection to a real
// publisher on demand, which is how TestKVEventsEndToEnd forces a genuine gap: batches
// published while the proxy refuses connections reach no subscriber, exactly as when a
// subscriber falls off a libzmq PUB, yet stay in the publisher's replay buffer. It knows
// nothing of ZMTP: it only forwards bytes and closes connections.

// tcpProxy forwards TCP connections from its own loopback port to target, byte for byte. The
// tests put it between a listener's SUB and a publisher's PUB to cut the connection on demand:
// while paused it accepts and immediately closes, so the publisher has no subscriber and drops
// what it publishes (exactly what libzmq does when the subscriber is gone).
//
// Concurrency: mu guards paused, target and conns; the accept loop and one pair of copy
// goroutines per connection run until Close.
type tcpProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	paused bool
	target string
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newTCPProxy starts a proxy to target ("host:port") and registers its Close.
func newTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Endpoint is the proxy's address as a ZMQ tcp endpoint.
func (p *tcpProxy) Endpoint() string { return "tcp://" + p.ln.Addr().String() }

// accept runs until the listening socket is closed. The upstream dial happens per accepted
// connection, so after a publisher restart the next connection reaches the new process.
func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		paused, target := p.paused, p.target
		p.mu.Unlock()
		if paused {
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		// Sever may have run while dialling: re-check under the lock, so that no pair
		// registered after a Sever escapes it.
		p.mu.Lock()
		if p.paused {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies src to dst; when either side ends both are closed.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Sever closes every forwarded connection and refuses new ones until Resume.
func (p *tcpProxy) Sever() {
	p.mu.Lock()
	p.paused = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// Resume accepts and forwards connections again.
func (p *tcpProxy) Resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *tcpProxy) Close() {
	_ = p.ln.Close()
	p.Sever()
	p.wg.Wait()
}
