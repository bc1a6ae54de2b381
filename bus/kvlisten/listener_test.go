package kvlisten

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

const wait = poll.Generous

// checkRecords asserts the applied sequence is exactly want, in order.
func checkRecords(t *testing.T, got []record, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("applied %d batches, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func recs(from, to uint64, prefix string, replayed bool) []record {
	var out []record
	for s := from; s < to; s++ {
		out = append(out, record{s, fmt.Sprintf("%s%d", prefix, s), replayed})
	}
	return out
}

// TestInOrderDelivery proves that contiguous live batches reach the handler once each, in order,
// unmodified and flagged live, and that the watermark follows them.
func TestInOrderDelivery(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	poll.True(t, wait, "active", func() bool { return l.State().Status == StatusActive })
	for i := 0; i < 100; i++ {
		p.publish(fmt.Sprintf("p%d", i))
	}
	poll.True(t, wait, "100 batches", func() bool { return h.count() == 100 })
	got, restarts, _ := h.snapshot()
	checkRecords(t, got, recs(0, 100, "p", false))
	st := l.State()
	if st.Watermark != 99 || !st.HasWatermark || st.Batches != 100 || st.Gaps != 0 || st.Lost != 0 || len(restarts) != 0 {
		t.Fatalf("state = %+v, restarts %v", st, restarts)
	}
}

// TestGapRepairedByReplay proves that a forward jump is filled from the ROUTER for both
// reply shapes (vLLM with topic, SGLang without), that only the gap is applied,
// flagged replayed, and that the request starts at W to probe the incarnation.
func TestGapRepairedByReplay(t *testing.T) {
	for _, shape := range []int{3, 2} {
		t.Run(fmt.Sprintf("reply_frames_%d", shape+1), func(t *testing.T) {
			p := newTestPub(t, pubOpts{replay: true, shape: shape})
			h := &recHandler{}
			l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
			p.waitSubscribed()
			for i := 0; i < 5; i++ {
				p.publish(fmt.Sprintf("p%d", i))
			}
			for i := 5; i < 10; i++ {
				p.drop(fmt.Sprintf("p%d", i))
			}
			for i := 10; i < 15; i++ {
				p.publish(fmt.Sprintf("p%d", i))
			}
			poll.True(t, wait, "15 batches", func() bool { return h.count() == 15 })
			got, _, _ := h.snapshot()
			want := append(append(recs(0, 5, "p", false), recs(5, 10, "p", true)...), recs(10, 15, "p", false)...)
			checkRecords(t, got, want)
			st := l.State()
			if st.Gaps != 1 || st.Replayed != 5 || st.Lost != 0 || st.Replays != 1 || st.ReplayFails != 0 || st.Watermark != 14 {
				t.Fatalf("state = %+v", st)
			}
			// The request starts at W (4), not W+1: the incarnation probe.
			if r := p.replayRequests(); !slices.Equal(r, []uint64{4}) {
				t.Fatalf("replay requests = %v, want [4]", r)
			}
		})
	}
}

// TestGapWithoutReplayIsCountedLost proves that without a replay endpoint a gap is counted as
// lost and the stream continues from the new batch.
func TestGapWithoutReplayIsCountedLost(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	p.publish("p0")
	p.drop("p1")
	p.drop("p2")
	p.publish("p3")
	poll.True(t, wait, "2 batches", func() bool { return h.count() == 2 })
	got, _, _ := h.snapshot()
	checkRecords(t, got, []record{{0, "p0", false}, {3, "p3", false}})
	if st := l.State(); st.Gaps != 1 || st.Lost != 2 || st.Watermark != 3 {
		t.Fatalf("state = %+v", st)
	}
}

// TestLateJoinerReplaysFromZero proves the "watermark unset and S > 0" rule: history the
// engine published before we subscribed is fetched from seq 0.
func TestLateJoinerReplaysFromZero(t *testing.T) {
	p := newTestPub(t, pubOpts{replay: true})
	for i := 0; i < 10; i++ {
		p.drop(fmt.Sprintf("p%d", i)) // published before anyone listened
	}
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
	p.waitSubscribed()
	p.publish("p10")
	poll.True(t, wait, "11 batches", func() bool { return h.count() == 11 })
	got, _, _ := h.snapshot()
	checkRecords(t, got, append(recs(0, 10, "p", true), record{10, "p10", false}))
	if r := p.replayRequests(); !slices.Equal(r, []uint64{0}) {
		t.Fatalf("replay requests = %v, want [0]", r)
	}
	if st := l.State(); st.Gaps != 1 || st.Replayed != 10 {
		t.Fatalf("state = %+v", st)
	}
}

// TestReplayHolesAndSilenceAreNotFatal proves that an engine buffer that forgot part of the gap,
// or a ROUTER that never answers, costs only the missing batches (counted
// lost) and never stalls the live stream.
func TestReplayHolesAndSilenceAreNotFatal(t *testing.T) {
	t.Run("evicted", func(t *testing.T) {
		p := newTestPub(t, pubOpts{replay: true})
		h := &recHandler{}
		l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
		p.waitSubscribed()
		p.publish("p0")
		for i := 1; i < 6; i++ {
			p.drop(fmt.Sprintf("p%d", i))
		}
		p.forget(0, 3) // the engine's buffer lost 0..2 (W=0 unverifiable, 1, 2 gone)
		p.publish("p6")
		poll.True(t, wait, "5 batches", func() bool { return h.count() == 5 })
		got, _, _ := h.snapshot()
		checkRecords(t, got, append(append([]record{{0, "p0", false}}, recs(3, 6, "p", true)...), record{6, "p6", false}))
		if st := l.State(); st.Lost != 2 || st.Restarts != 0 || st.Watermark != 6 {
			t.Fatalf("state = %+v", st)
		}
	})
	t.Run("silent", func(t *testing.T) {
		p := newTestPub(t, pubOpts{replay: true})
		p.setSilent(true)
		h := &recHandler{}
		l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h, ReplayTimeout: 150 * time.Millisecond})
		p.waitSubscribed()
		p.publish("p0")
		p.drop("p1")
		p.publish("p2")
		p.publish("p3")
		poll.True(t, wait, "3 batches", func() bool { return h.count() == 3 })
		got, _, _ := h.snapshot()
		checkRecords(t, got, []record{{0, "p0", false}, {2, "p2", false}, {3, "p3", false}})
		if st := l.State(); st.ReplayFails != 1 || st.Lost != 1 || st.Replays != 1 {
			t.Fatalf("state = %+v", st)
		}
	})
}

// TestStaleSkipped proves that S <= W near the watermark on an established connection
// is skipped as stale, not mistaken for a restart.
func TestStaleSkipped(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	for i := uint64(0); i < 10; i++ {
		p.publish(fmt.Sprintf("p%d", i))
	}
	p.sendRaw([]byte("kv-events"), encodeSeq(8), []byte("dup8")) // near W: stale
	p.sendRaw([]byte("kv-events"), encodeSeq(9), []byte("dup9"))
	p.publish("p10")
	poll.True(t, wait, "11 batches", func() bool { return h.count() == 11 })
	got, restarts, _ := h.snapshot()
	checkRecords(t, got, recs(0, 11, "p", false))
	if st := l.State(); st.Stale != 2 || st.Restarts != 0 || len(restarts) != 0 {
		t.Fatalf("state = %+v", st)
	}
}

// TestUndecodableDoesNotAdvanceWatermark proves that a handler error leaves W alone, and that the
// failed batch is requested once more via replay when an endpoint exists.
func TestUndecodableDoesNotAdvanceWatermark(t *testing.T) {
	for _, withReplay := range []bool{false, true} {
		t.Run(fmt.Sprintf("replay=%v", withReplay), func(t *testing.T) {
			p := newTestPub(t, pubOpts{replay: withReplay})
			h := &recHandler{}
			l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
			p.waitSubscribed()
			p.publish("p0")
			p.publish("bad1")
			poll.True(t, wait, "undecodable", func() bool { return l.State().Undecodable == 1 })
			if st := l.State(); st.Watermark != 0 || st.Batches != 1 {
				t.Fatalf("after undecodable: %+v", st)
			}
			p.publish("p2")
			poll.True(t, wait, "p2", func() bool { return h.count() == 2 })
			st := l.State()
			if st.Watermark != 2 {
				t.Fatalf("state = %+v", st)
			}
			if withReplay {
				// Batch 1 was asked for once more and failed again.
				if st.Undecodable != 2 || st.Lost != 0 || st.Replays != 1 {
					t.Fatalf("state = %+v", st)
				}
			} else if st.Undecodable != 1 || st.Lost != 1 {
				t.Fatalf("state = %+v", st)
			}
		})
	}
}

// TestMalformedDropped proves that every wrong frame shape is counted and dropped while
// the following valid batch is still applied.
func TestMalformedDropped(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	p.sendRaw([]byte("kv-events"), encodeSeq(0))                               // 2 frames
	p.sendRaw([]byte("kv-events"), []byte{0, 0, 0, 0, 0, 0, 0}, []byte("x"))   // 7-byte seq
	p.sendRaw([]byte("kv-events"), encodeSeq(0), []byte("x"), []byte("extra")) // 4 frames
	p.sendRaw([]byte("kv-events"), append(encodeSeq(0), 0), []byte("x"))       // 9-byte seq
	p.publish("p0")
	poll.True(t, wait, "p0", func() bool { return h.count() == 1 })
	if st := l.State(); st.Malformed != 4 || st.Watermark != 0 || st.Batches != 1 {
		t.Fatalf("state = %+v", st)
	}
}

// TestGateBuffersUntilOpen proves that nothing is applied while the gate is closed, that
// the bounded buffer keeps the oldest batches, and that the overflow becomes
// an ordinary gap repaired by replay once the gate opens.
func TestGateBuffersUntilOpen(t *testing.T) {
	p := newTestPub(t, pubOpts{replay: true})
	gate := make(chan struct{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h, Gate: gate, BufferBatches: 4})
	p.waitSubscribed()
	for i := 0; i < 10; i++ {
		p.publish(fmt.Sprintf("p%d", i))
	}
	poll.True(t, wait, "buffered+overflowed", func() bool {
		st := l.State()
		return st.Buffered == 4 && st.Overflowed == 6
	})
	if st := l.State(); st.Status != StatusPending || st.Batches != 0 || h.count() != 0 {
		t.Fatalf("applied while gated: %+v", st)
	}
	close(gate)
	poll.True(t, wait, "buffer applied", func() bool { return h.count() == 4 })
	if st := l.State(); st.Status != StatusActive || st.Buffered != 0 {
		t.Fatalf("state = %+v", st)
	}
	p.publish("p10") // reveals the overflow gap 4..9, repaired by replay
	poll.True(t, wait, "11 batches", func() bool { return h.count() == 11 })
	got, _, _ := h.snapshot()
	checkRecords(t, got, append(append(recs(0, 4, "p", false), recs(4, 10, "p", true)...), record{10, "p10", false}))
}

// closeWithin fails the test if Close does not return within d.
func closeWithin(t *testing.T, l *Listener, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close did not return within %v", d)
	}
	if st := l.State(); st.Status != StatusClosed {
		t.Fatalf("status after Close = %v", st.Status)
	}
}

// TestClosePrompt proves Close returns quickly whichever zmq4 call the listener is
// blocked in: Recv, dial retries, a ZMTP handshake with a silent peer, or a
// replay read.
func TestClosePrompt(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) (Config, func(l *Listener) bool)
	}{
		{"blocked_in_recv", func(t *testing.T) (Config, func(*Listener) bool) {
			p := newTestPub(t, pubOpts{})
			return Config{Endpoint: p.pubEP}, func(l *Listener) bool { return l.State().Status == StatusActive }
		}},
		{"dialing_nobody", func(t *testing.T) (Config, func(*Listener) bool) {
			return Config{Endpoint: freeEndpoint(t), MinBackoff: time.Second, MaxBackoff: 5 * time.Second},
				func(l *Listener) bool { return l.State().Status == StatusFailed }
		}},
		{"stuck_handshake", func(t *testing.T) (Config, func(*Listener) bool) {
			ep, greeted := silentTCP(t)
			return Config{Endpoint: ep, DialTimeout: time.Minute}, func(*Listener) bool { return greeted() }
		}},
		{"stuck_replay", func(t *testing.T) (Config, func(*Listener) bool) {
			p := newTestPub(t, pubOpts{replay: true})
			p.setSilent(true)
			p.drop("p0")
			go func() { p.waitSubscribed(); p.publish("p1") }()
			return Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, ReplayTimeout: time.Minute},
				func(*Listener) bool { return len(p.replayRequests()) == 1 }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ready := tc.setup(t)
			cfg.Handler = &recHandler{}
			l := startListener(t, cfg)
			poll.True(t, wait, "ready", func() bool { return ready(l) })
			closeWithin(t, l, 30*time.Second) // well under the stuck cases' 1-minute timeouts
		})
	}
}

// TestHandshakeTimeoutFails proves DialTimeout bounds a handshake with a peer that never
// speaks ZMTP and that the reason reaches State.LastError.
func TestHandshakeTimeoutFails(t *testing.T) {
	ep, _ := silentTCP(t)
	l := startListener(t, Config{Endpoint: ep, Handler: &recHandler{}, DialTimeout: 100 * time.Millisecond})
	poll.True(t, wait, "failed", func() bool { return l.State().Status == StatusFailed })
	if st := l.State(); !strings.Contains(st.LastError, "handshake") {
		t.Fatalf("LastError = %q", st.LastError)
	}
}

// TestStartContextCancelStops proves that cancelling the Start context stops the listener.
func TestStartContextCancelStops(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	ctx, cancel := testContext(t)
	l, err := Start(ctx, Config{Endpoint: p.pubEP, Handler: &recHandler{}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	p.waitSubscribed()
	cancel()
	poll.True(t, wait, "closed", func() bool { return l.State().Status == StatusClosed })
	closeWithin(t, l, 30*time.Second) // well under the stuck cases' 1-minute timeouts
}

// TestNoGoroutineLeak proves that after replay, reconnect and Close no goroutine of
// the listener (or of the zmq4 sockets it created) survives.
func TestNoGoroutineLeak(t *testing.T) {
	p := newTestPub(t, pubOpts{replay: true})
	h := &recHandler{}
	l, err := Start(t.Context(), Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h,
		Logger: testLogger(t), MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p.waitSubscribed()
	p.publish("p0")
	for i := 1; i < 30; i++ {
		p.drop(fmt.Sprintf("p%d", i))
	}
	p.publish("p30") // gap → replay DEALER opened and closed
	poll.True(t, wait, "31 batches", func() bool { return h.count() == 31 })
	p.reopenPub() // forces a SUB reconnect
	p.waitSubscribed()
	p.publish("p31")
	poll.True(t, wait, "32 batches", func() bool { return h.count() == 32 })
	// Steady state: receiver, processor, the SUB's connection reader and
	// its conn reaper. The replay DEALER and the first SUB must already be
	// gone, long before Close.
	poll.True(t, wait, "steady-state goroutines", func() bool { n, _ := listenerGoroutines(); return n == 4 })
	closeWithin(t, l, 30*time.Second) // well under the stuck cases' 1-minute timeouts
	poll.Until(t, wait, func() error {
		if n, dump := listenerGoroutines(); n != 0 {
			return fmt.Errorf("%d listener goroutines survive Close:\n%s", n, dump)
		}
		return nil
	})
}

// listenerGoroutines returns the goroutines that belong to listeners: the
// package's own loops and the go-zeromq machinery of the SUB and DEALER
// sockets they dial (the test engine only uses PUB and ROUTER sockets, which
// Listen). Counting only these keeps the check immune to other tests'
// sockets still winding down.
func listenerGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var hits []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, mark := range []string{"kvlisten.(*Listener)", "kvlisten.(*zsock)", "kvlisten.dialSocket",
			"zmq4.(*qreader)", "zmq4.(*socket).Dial"} {
			if strings.Contains(g, mark) && !strings.Contains(g, "kvlisten.TestNoGoroutineLeak") {
				hits = append(hits, g)
				break
			}
		}
	}
	return len(hits), strings.Join(hits, "\n\n")
}
