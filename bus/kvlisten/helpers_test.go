package kvlisten

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/internal/poll"
)

// encodeSeq returns the 8-byte big-endian sequence frame for seq.
func encodeSeq(seq uint64) []byte { return kvevents.AppendReplayRequest(nil, seq) }

// testLogger writes listener logs to the test log when -v is set.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// record is one Apply call seen by recHandler.
type record struct {
	seq      uint64
	payload  string
	replayed bool
}

// errBadPayload is what recHandler returns for payloads starting with "bad".
var errBadPayload = errors.New("test: undecodable payload")

// recHandler records every callback. Payloads beginning with "bad" are
// rejected as undecodable. Safe for concurrent inspection.
type recHandler struct {
	mu       sync.Mutex
	applied  []record
	restarts [][2]uint64
	order    []string // "apply:<seq>" / "restart:<prev>:<seq>" interleaved
}

func (h *recHandler) Apply(seq uint64, payload []byte, replayed bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.HasPrefix(payload, []byte("bad")) {
		return errBadPayload
	}
	h.applied = append(h.applied, record{seq, string(payload), replayed})
	h.order = append(h.order, fmt.Sprintf("apply:%d", seq))
	return nil
}

func (h *recHandler) Restarted(prev, seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarts = append(h.restarts, [2]uint64{prev, seq})
	h.order = append(h.order, fmt.Sprintf("restart:%d:%d", prev, seq))
}

func (h *recHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.applied)
}

func (h *recHandler) snapshot() ([]record, [][2]uint64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.applied...), append([][2]uint64(nil), h.restarts...), append([]string(nil), h.order...)
}

// testPub emulates an engine's ZmqEventPublisher with go-zeromq: a PUB bound
// to 127.0.0.1 and, optionally, a ROUTER replay server answering the vLLM
// replay protocol from an in-memory buffer. publish/drop/sendRaw must be
// called from one goroutine (the test), like the engine's publisher thread.
type testPub struct {
	t        testing.TB
	topic    string
	pub      zmq4.Socket
	router   zmq4.Socket
	pubEP    string
	replayEP string
	shape    int // replay reply frames after the delimiter: 3 (vLLM) or 2 (SGLang)

	mu        sync.Mutex
	seq       uint64
	buf       []record // replay buffer (seq, payload)
	silent    bool     // ignore replay requests
	requests  []uint64 // start seqs requested
	routerWG  sync.WaitGroup
	closeOnce sync.Once
}

type pubOpts struct {
	pubAddr, replayAddr string // "127.0.0.1:port"; empty → random port
	replay              bool
	shape               int
}

func newTestPub(t testing.TB, o pubOpts) *testPub {
	t.Helper()
	p := &testPub{t: t, topic: "kv-events", shape: o.shape}
	if p.shape == 0 {
		p.shape = 3
	}
	p.openPub(o.pubAddr)
	if o.replay {
		addr := o.replayAddr
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		p.router = zmq4.NewRouter(context.Background())
		if err := p.router.Listen("tcp://" + addr); err != nil {
			t.Fatalf("router listen: %v", err)
		}
		p.replayEP = "tcp://" + p.router.Addr().String()
		p.routerWG.Add(1)
		go p.serveReplay()
	}
	t.Cleanup(p.close)
	return p
}

// openPub binds a fresh PUB socket at addr (random port when empty).
func (p *testPub) openPub(addr string) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	pub := zmq4.NewPub(context.Background())
	// The old socket's port may take a moment to free.
	err := poll.Poll(poll.Generous, 10*time.Millisecond, func() error { return pub.Listen("tcp://" + addr) })
	if err != nil {
		p.t.Fatalf("pub listen %s: %v", addr, err)
	}
	p.pub = pub
	p.pubEP = "tcp://" + pub.Addr().String()
}

// reopenPub closes and re-binds the PUB at the same address, keeping the
// sequence counter and replay buffer: the same incarnation, new socket.
func (p *testPub) reopenPub() {
	addr := strings.TrimPrefix(p.pubEP, "tcp://")
	_ = p.pub.Close()
	p.openPub(addr)
}

// restart closes p and starts a new incarnation (sequence 0, empty replay buffer) on the same
// PUB and replay addresses.
func (p *testPub) restart() *testPub {
	p.t.Helper()
	addrs := p.addrs()
	p.close()
	return newTestPub(p.t, addrs)
}

func (p *testPub) addrs() pubOpts {
	o := pubOpts{pubAddr: strings.TrimPrefix(p.pubEP, "tcp://"), shape: p.shape}
	if p.replayEP != "" {
		o.replay, o.replayAddr = true, strings.TrimPrefix(p.replayEP, "tcp://")
	}
	return o
}

// waitSubscribed blocks until a SUB has subscribed, so that the next
// publish is delivered (go-zeromq's PUB drops for unsubscribed peers).
func (p *testPub) waitSubscribed() {
	p.t.Helper()
	poll.True(p.t, 10*time.Second, "subscriber", func() bool {
		return len(p.pub.(zmq4.Topics).Topics()) > 0
	})
}

// publish sends payload with the next sequence number and buffers it.
func (p *testPub) publish(payload string) uint64 {
	seq := p.next(payload)
	p.sendRaw([]byte(p.topic), encodeSeq(seq), []byte(payload))
	return seq
}

// drop consumes a sequence number and buffers the batch without sending it:
// what a PUB high-water-mark drop looks like downstream.
func (p *testPub) drop(payload string) uint64 { return p.next(payload) }

func (p *testPub) next(payload string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.seq
	p.seq++
	p.buf = append(p.buf, record{seq: seq, payload: payload})
	return seq
}

func (p *testPub) sendRaw(frames ...[]byte) {
	p.t.Helper()
	if err := p.pub.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		p.t.Fatalf("pub send: %v", err)
	}
}

// forget removes seqs [from, to) from the replay buffer (eviction).
func (p *testPub) forget(from, to uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.buf[:0]
	for _, r := range p.buf {
		if r.seq < from || r.seq >= to {
			kept = append(kept, r)
		}
	}
	p.buf = kept
}

func (p *testPub) setSilent(v bool) { p.mu.Lock(); p.silent = v; p.mu.Unlock() }

func (p *testPub) replayRequests() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint64(nil), p.requests...)
}

// serveReplay answers [id, "", start8] requests like vLLM's publisher.
func (p *testPub) serveReplay() {
	defer p.routerWG.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return
			}
			continue // a DEALER went away
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 0 || len(msg.Frames[2]) != 8 {
			continue
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		p.mu.Lock()
		p.requests = append(p.requests, start)
		silent := p.silent
		buf := append([]record(nil), p.buf...)
		p.mu.Unlock()
		if silent {
			continue
		}
		for _, r := range buf {
			if r.seq < start {
				continue
			}
			_ = p.router.SendMulti(zmq4.NewMsgFrom(p.replyFrames(id, r.seq, []byte(r.payload))...))
		}
		_ = p.router.SendMulti(zmq4.NewMsgFrom(p.replyFrames(id, kvevents.ReplayEndSeq, nil)...))
	}
}

func (p *testPub) replyFrames(id []byte, seq uint64, payload []byte) [][]byte {
	if p.shape == 2 {
		return [][]byte{id, {}, encodeSeq(seq), payload}
	}
	topic := []byte(p.topic)
	if seq == kvevents.ReplayEndSeq {
		topic = []byte{}
	}
	return [][]byte{id, {}, topic, encodeSeq(seq), payload}
}

// close shuts both sockets and waits for the replay goroutine.
func (p *testPub) close() {
	p.closeOnce.Do(func() {
		_ = p.pub.Close()
		if p.router != nil {
			_ = p.router.Close()
			p.routerWG.Wait()
		}
	})
}

// startListener starts a listener with test-friendly timings and registers
// Close as cleanup.
func startListener(t testing.TB, cfg Config) *Listener {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 50 * time.Millisecond
	}
	if cfg.ReplayTimeout == 0 {
		cfg.ReplayTimeout = 2 * time.Second
	}
	l, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = l.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(poll.Generous):
			t.Error("Close hung in cleanup")
		}
	})
	return l
}

// serveTCP accepts TCP connections on 127.0.0.1 and runs handle on each in its own goroutine
// until the test ends, when the listener and every accepted connection are closed and the
// goroutines waited for. It returns the tcp:// endpoint.
func serveTCP(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "tcp://" + ln.Addr().String()
}

// silentTCP accepts TCP connections and never speaks ZMTP. It returns the
// endpoint and a function that reports whether the peer's ZMTP greeting
// has arrived on an accepted connection (so the peer is blocked in the
// handshake).
func silentTCP(t testing.TB) (string, func() bool) {
	t.Helper()
	var greeted atomic.Bool
	ep := serveTCP(t, func(c net.Conn) {
		var b [10]byte // ZMTP signature
		if _, err := io.ReadFull(c, b[:]); err == nil {
			greeted.Store(true)
		}
	})
	return ep, greeted.Load
}

// freeEndpoint returns a tcp endpoint on a port nobody listens on.
func freeEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + ln.Addr().String()
	_ = ln.Close()
	return ep
}
