package api

import (
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// maxRejecting bounds the goroutines answering over-cap connections at once; past it an
// over-cap connection is closed without an answer (a flood must not grow goroutines either).
const maxRejecting = 256

// rejectDeadline bounds how long answering one over-cap connection may take.
const rejectDeadline = time.Second

// Listener wraps ln so that at most MaxConns client connections are open at once. A
// connection beyond the cap is accepted, answered at once with
//
//	HTTP/1.1 503 Service Unavailable, Retry-After: 1, {"error":"too many connections (limit N)"}
//
// and closed, and counted in kvselect_http_connections_rejected_total.
//
// Why not golang.org/x/net/netutil.LimitListener: it stops calling Accept at the cap, so an
// excess client sits in the kernel's backlog with no answer until its own timeout, and a
// health probe queues behind the flood. An immediate 503 is a clear, retryable error that load
// balancers and clients act on. MaxConns <= 0 returns ln unchanged.
func (g *Guard) Listener(ln net.Listener) net.Listener {
	if g.lim.MaxConns <= 0 {
		return ln
	}
	body := `{"error":"too many connections (limit ` + strconv.Itoa(g.lim.MaxConns) + `)"}`
	resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	return &capListener{Listener: ln, g: g, resp: []byte(resp)}
}

type capListener struct {
	net.Listener
	g    *Guard
	resp []byte
}

// Accept returns the next connection within the cap, answering and closing those beyond it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.g.conns.Add(1); n <= int64(l.g.lim.MaxConns) {
			return &capConn{Conn: c, g: l.g}, nil
		}
		l.g.conns.Add(-1)
		l.g.connsRejected.Add(1)
		if l.g.rejecting.Add(1) > maxRejecting {
			l.g.rejecting.Add(-1)
			_ = c.Close()
			continue
		}
		go l.reject(c)
	}
}

// reject answers an over-cap connection with the 503, half-closes it, and reads (discarding)
// what the client sent until it closes or the deadline passes, so that closing the socket with
// unread request bytes does not reset the connection before the client has read the answer.
func (l *capListener) reject(c net.Conn) {
	defer l.g.rejecting.Add(-1)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rejectDeadline))
	if _, err := c.Write(l.resp); err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

// capConn releases its slot once, on the first Close.
type capConn struct {
	net.Conn
	g    *Guard
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.conns.Add(-1) })
	return err
}

// CloseWrite half-closes the connection when the underlying one can (net/http uses it to
// flush a final response before closing).
func (c *capConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
