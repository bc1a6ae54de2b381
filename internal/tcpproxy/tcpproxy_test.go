package tcpproxy

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echo starts a loopback server that echoes every connection until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes a line and reads it back within d; ok is false on a timeout or error.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestPauseHoldsBytes: while paused nothing arrives but the connection stays open; on Resume
// the held bytes arrive on the same connection.
func TestPauseHoldsBytes(t *testing.T) {
	p := New(t, echo(t))
	c, r := dial(t, p)
	if got, err := roundTrip(c, r, "a", 30*time.Second); err != nil || got != "a\n" {
		t.Fatalf("before pause: %q %v", got, err)
	}
	p.Pause()
	if got, err := roundTrip(c, r, "b", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("paused: got %q, err %v; want a timeout", got, err)
	}
	p.Resume()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "b\n" {
		t.Fatalf("after resume: %q %v, want the held bytes", got, err)
	}
}

// TestSeverRefuses: Sever closes the relayed connection, new connections are closed at once
// until Resume, and after Resume a new connection relays again.
func TestSeverRefuses(t *testing.T) {
	p := New(t, echo(t))
	c, r := dial(t, p)
	if got, err := roundTrip(c, r, "a", 30*time.Second); err != nil || got != "a\n" {
		t.Fatalf("before sever: %q %v", got, err)
	}
	p.Sever()
	if _, err := roundTrip(c, r, "b", 30*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("severed connection: err %v, want it closed", err)
	}
	c2, r2 := dial(t, p)
	if _, err := roundTrip(c2, r2, "c", 30*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("connection while severed: err %v, want it closed", err)
	}
	p.Resume()
	c3, r3 := dial(t, p)
	if got, err := roundTrip(c3, r3, "d", 30*time.Second); err != nil || got != "d\n" {
		t.Fatalf("after resume: %q %v", got, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
