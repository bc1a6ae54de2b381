package kvlisten

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/internal/poll"
)

// TestRestartRule1Reconnect proves restart rule 1: a publisher restarted at the same
// address is detected on the first batch after the reconnect, Restarted runs
// before that batch, and status goes failed → active.
func TestRestartRule1Reconnect(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	for i := 0; i < 50; i++ {
		p.publish(fmt.Sprintf("a%d", i))
	}
	poll.True(t, wait, "50 batches", func() bool { return h.count() == 50 })
	addrs := p.addrs()
	p.close()
	poll.True(t, wait, "failed", func() bool { return l.State().Status == StatusFailed })
	if st := l.State(); st.LastError == "" {
		t.Fatalf("no last error: %+v", st)
	}
	// The engine comes back at the same address and counts from 0 again.
	q := newTestPub(t, addrs)
	q.waitSubscribed()
	for i := 0; i < 5; i++ {
		q.publish(fmt.Sprintf("b%d", i))
	}
	poll.True(t, wait, "55 batches", func() bool { return h.count() == 55 })
	got, restarts, order := h.snapshot()
	checkRecords(t, got[50:], recs(0, 5, "b", false))
	if !slices.Equal(restarts, [][2]uint64{{49, 0}}) {
		t.Fatalf("restarts = %v", restarts)
	}
	if order[50] != "restart:49:0" || order[51] != "apply:0" {
		t.Fatalf("Restarted not called before the first batch: %v", order[48:])
	}
	if st := l.State(); st.Restarts != 1 || st.Connects != 2 || st.Watermark != 4 || st.Status != StatusActive {
		t.Fatalf("state = %+v", st)
	}
}

// TestRestartRule1WithReplayFromZero proves that after a detected restart the batches the new
// incarnation sent before we reconnected are replayed from seq 0.
func TestRestartRule1WithReplayFromZero(t *testing.T) {
	p := newTestPub(t, pubOpts{replay: true})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
	p.waitSubscribed()
	for i := 0; i < 20; i++ {
		p.publish(fmt.Sprintf("a%d", i))
	}
	poll.True(t, wait, "20 batches", func() bool { return h.count() == 20 })
	q := p.restart()
	for i := 0; i < 3; i++ {
		q.drop(fmt.Sprintf("b%d", i)) // sent before we reconnected
	}
	q.waitSubscribed()
	q.publish("b3")
	poll.True(t, wait, "24 batches", func() bool { return h.count() == 24 })
	got, restarts, _ := h.snapshot()
	checkRecords(t, got[20:], append(recs(0, 3, "b", true), record{3, "b3", false}))
	if !slices.Equal(restarts, [][2]uint64{{19, 3}}) {
		t.Fatalf("restarts = %v", restarts)
	}
	if st := l.State(); st.Restarts != 1 || st.Watermark != 3 {
		t.Fatalf("state = %+v", st)
	}
}

// TestRestartRule2NearZeroSameConnection proves restart rule 2: a counter that falls back near 0
// without any reconnect is a restart, not stale.
func TestRestartRule2NearZeroSameConnection(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	p.waitSubscribed()
	for i := 0; i < 100; i++ {
		p.publish(fmt.Sprintf("a%d", i))
	}
	p.sendRaw([]byte("kv-events"), encodeSeq(1), []byte("b1")) // new counter, no reconnect
	p.sendRaw([]byte("kv-events"), encodeSeq(2), []byte("b2"))
	poll.True(t, wait, "102 batches", func() bool { return h.count() == 102 })
	got, restarts, _ := h.snapshot()
	checkRecords(t, got[100:], []record{{1, "b1", false}, {2, "b2", false}})
	if !slices.Equal(restarts, [][2]uint64{{99, 1}}) {
		t.Fatalf("restarts = %v", restarts)
	}
	if st := l.State(); st.Restarts != 1 || st.Lost != 1 || st.Stale != 0 {
		t.Fatalf("state = %+v", st) // batch 0 of the new incarnation was never seen
	}
}

// TestRestartRule3Probe proves restart rule 3: a restarted engine whose counter looks
// contiguous is caught by the payload-hash probe, while a reconnect to the same
// incarnation is not mistaken for a restart.
func TestRestartRule3Probe(t *testing.T) {
	t.Run("restarted_contiguous", func(t *testing.T) {
		p := newTestPub(t, pubOpts{replay: true})
		h := &recHandler{}
		l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
		p.waitSubscribed()
		for i := 0; i < 10; i++ {
			p.publish(fmt.Sprintf("a%d", i))
		}
		poll.True(t, wait, "10 batches", func() bool { return h.count() == 10 })
		q := p.restart()
		for i := 0; i < 10; i++ {
			q.drop(fmt.Sprintf("b%d", i))
		}
		q.waitSubscribed()
		q.publish("b10") // looks contiguous with W=9
		poll.True(t, wait, "21 batches", func() bool { return h.count() == 21 })
		got, restarts, _ := h.snapshot()
		checkRecords(t, got[10:], append(recs(0, 10, "b", true), record{10, "b10", false}))
		if !slices.Equal(restarts, [][2]uint64{{9, 10}}) {
			t.Fatalf("restarts = %v", restarts)
		}
		if r := q.replayRequests(); !slices.Equal(r, []uint64{9, 0}) {
			t.Fatalf("replay requests = %v, want probe at 9 then [0,10)", r)
		}
		if st := l.State(); st.Restarts != 1 || st.Watermark != 10 {
			t.Fatalf("state = %+v", st)
		}
	})
	t.Run("same_incarnation_reconnect", func(t *testing.T) {
		p := newTestPub(t, pubOpts{replay: true})
		h := &recHandler{}
		l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
		p.waitSubscribed()
		for i := 0; i < 10; i++ {
			p.publish(fmt.Sprintf("a%d", i))
		}
		poll.True(t, wait, "10 batches", func() bool { return h.count() == 10 })
		p.reopenPub() // connection breaks, counter and buffer survive
		p.drop("a10")
		p.waitSubscribed()
		p.publish("a11")
		poll.True(t, wait, "12 batches", func() bool { return h.count() == 12 })
		got, restarts, _ := h.snapshot()
		checkRecords(t, got[10:], []record{{10, "a10", true}, {11, "a11", false}})
		if len(restarts) != 0 {
			t.Fatalf("false restart: %v", restarts)
		}
		if st := l.State(); st.Connects != 2 || st.Restarts != 0 {
			t.Fatalf("state = %+v", st)
		}
	})
}
