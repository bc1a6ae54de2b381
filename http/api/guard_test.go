package api_test

// Tests of the HTTP guard (deadlines, connection cap, body-memory budget) over real loopback
// sockets, with raw TCP clients so that a stalled body or an idle connection is exactly what
// the test sends. Every expectation is polled with a generous deadline.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// guardedServer serves api.New for a local service through g on a loopback port.
func guardedServer(t *testing.T, lim api.Limits) (addr string, g *api.Guard) {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.NewLocal(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	g = api.NewGuard(lim, nil)
	srv := g.Server("127.0.0.1:0", api.New(svc, api.Options{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(g.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close(); _ = svc.Close() })
	return ln.Addr().String(), g
}

// stalledUpload opens a connection, sends headers declaring declared bytes and then sent bytes
// of a JSON body, and leaves the connection open.
func stalledUpload(t *testing.T, addr string, declared, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /workers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", declared)
	body := make([]byte, sent)
	body[0] = '{'
	for i := 1; i < sent; i++ {
		body[i] = ' '
	}
	// The body is written beside the caller's reads: a server that refuses it part-way answers
	// and closes with the rest unread, and a write still blocked then fails with a reset (seen on
	// a loaded machine) while the answer is already on its way. What the server received is
	// checked by the callers, through its stats and answers.
	go func() { _, _ = c.Write(body) }()
	return c
}

// readStatus reads one HTTP response from c (deadline 30 s) and returns its status and body.
func readStatus(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestGuardCutsSlowBody: a body that stalls past the read deadline gets 408 and its
// connection is closed; the guard counts the cut and releases the body's memory.
func TestGuardCutsSlowBody(t *testing.T) {
	lim := api.DefaultLimits()
	lim.ReadTimeout = 300 * time.Millisecond
	addr, g := guardedServer(t, lim)
	c := stalledUpload(t, addr, 1<<20, 1000)
	status, body := readStatus(t, c)
	if status != http.StatusRequestTimeout || !strings.Contains(body, "slow body cut") {
		t.Fatalf("stalled body: %d %s, want 408 naming the cut", status, body)
	}
	poll.True(t, 30*time.Second, "timeout counted and body memory released", func() bool {
		st := g.Stats()
		return st.BodyTimeouts == 1 && st.BodyBytes == 0
	})
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after the cut")
	}
}

// TestGuardBodyBudget: bodies in flight beyond the budget are refused with 503 (naming the
// flag and its value) while the first stays in flight; once it is cut, new bodies fit again.
func TestGuardBodyBudget(t *testing.T) {
	lim := api.DefaultLimits()
	lim.ReadTimeout = 2 * time.Second
	lim.MaxBodyBytesInFlight = 5 << 20
	addr, g := guardedServer(t, lim)
	first := stalledUpload(t, addr, 8<<20-1, 3<<19)
	poll.True(t, 30*time.Second, "first body buffered", func() bool { return g.Stats().BodyBytes >= 3<<19 })
	second := stalledUpload(t, addr, 8<<20-1, 3<<19)
	status, body := readStatus(t, second)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "--http-max-body-bytes-in-flight 5242880") {
		t.Fatalf("over-budget body: %d %s, want 503 naming the budget", status, body)
	}
	if st := g.Stats(); st.BodyRejected != 1 || st.BodyPeak > lim.MaxBodyBytesInFlight {
		t.Fatalf("stats %+v: want one rejection and a peak within the budget", st)
	}
	if status, _ := readStatus(t, first); status != http.StatusRequestTimeout {
		t.Fatalf("first body: %d, want 408 once cut", status)
	}
	poll.True(t, 30*time.Second, "budget released", func() bool { return g.Stats().BodyBytes == 0 })
	c := stalledUpload(t, addr, 2, 2)
	if status, body := readStatus(t, c); status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		t.Fatalf("small body after release: %d %s, want it decoded (400/422), not refused", status, body)
	}
}

// TestGuardConnectionCap: past MaxConns a connection is answered 503 at once, naming the
// limit; when a connection closes, a new one is served.
func TestGuardConnectionCap(t *testing.T) {
	lim := api.DefaultLimits()
	lim.MaxConns = 2
	addr, g := guardedServer(t, lim)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	poll.True(t, 30*time.Second, "two connections accepted", func() bool { return g.Stats().Conns == 2 })
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	fmt.Fprint(extra, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	status, body := readStatus(t, extra)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections (limit 2)") {
		t.Fatalf("over-cap connection: %d %s", status, body)
	}
	if g.Stats().ConnsRejected != 1 {
		t.Fatalf("stats %+v: want one rejected connection", g.Stats())
	}
	held[0].Close()
	poll.True(t, 30*time.Second, "a freed slot serves a new connection", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		fmt.Fprint(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestGuardIdleAndHeaderTimeouts: a connection that never sends headers is closed after
// ReadHeaderTimeout.
func TestGuardHeaderTimeout(t *testing.T) {
	lim := api.DefaultLimits()
	lim.ReadHeaderTimeout = 200 * time.Millisecond
	addr, g := guardedServer(t, lim)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST /workers HTTP/1.1\r\nHost: x\r\n") // headers never finish
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("connection not closed by the header deadline: %v", err)
	}
	poll.True(t, 30*time.Second, "slot released", func() bool { return g.Stats().Conns == 0 })
}
