package kvlisten

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/internal/poll"
)

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	ctx := context.Background()
	if err := b.acquire(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if !b.sem.TryAcquire(4) {
		t.Fatal("4 of the 10 bytes should be free")
	}
	b.sem.Release(4)
	if err := b.acquire(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if b.used() != 10 || b.sem.TryAcquire(1) {
		t.Fatalf("used %d, and a byte beyond the budget was free", b.used())
	}
	b.release(6)
	if err := b.acquire(ctx, 6); err != nil {
		t.Fatalf("acquire within the budget: %v", err)
	}
	b.release(6)
	b.release(4)
	if b.used() != 0 || !b.sem.TryAcquire(10) {
		t.Fatalf("used %d after releasing everything", b.used())
	}
}

// blockingHandler holds its first Apply until release is closed.
type blockingHandler struct {
	recHandler
	entered chan struct{}
	release chan struct{}
	first   bool
}

func (h *blockingHandler) Apply(seq uint64, payload []byte, replayed bool) error {
	if !h.first {
		h.first = true
		close(h.entered)
		<-h.release
	}
	return h.recHandler.Apply(seq, payload, replayed)
}

// TestQueueBytesBoundsHandOff: while the Handler is stuck, the receiver takes batches only up
// to QueueBytes (here three), then stops reading; nothing is lost once the Handler resumes.
func TestQueueBytesBoundsHandOff(t *testing.T) {
	const size, n = 1000, 10
	p := newTestPub(t, pubOpts{})
	h := &blockingHandler{entered: make(chan struct{}), release: make(chan struct{})}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h, QueueBytes: 3 * size})
	p.waitSubscribed()
	poll.True(t, wait, "active", func() bool { return l.State().Status == StatusActive })
	for i := range n {
		p.publish(fmt.Sprintf("%03d%s", i, strings.Repeat("x", size-3)))
	}
	<-h.entered
	poll.True(t, wait, "budget full", func() bool { return l.State().QueuedBytes == 3*size })
	if q := len(l.in); q > 2 {
		t.Fatalf("%d batches queued behind the one being handled; the budget allows 2", q)
	}
	close(h.release)
	poll.True(t, wait, "all batches", func() bool { return h.count() == n })
	got, _, _ := h.snapshot()
	for i, r := range got {
		if r.seq != uint64(i) {
			t.Fatalf("batch %d has seq %d", i, r.seq)
		}
	}
	poll.True(t, wait, "budget empty", func() bool { return l.State().QueuedBytes == 0 })
}

// TestGateBufferReturnsBudget: batches moved into the gate buffer give their bytes back, so a
// closed gate never stalls the receiver at QueueBytes.
func TestGateBufferReturnsBudget(t *testing.T) {
	const size, n = 1000, 10
	p := newTestPub(t, pubOpts{})
	gate := make(chan struct{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h, Gate: gate, QueueBytes: 3 * size})
	p.waitSubscribed()
	for i := range n {
		p.publish(fmt.Sprintf("%03d%s", i, strings.Repeat("x", size-3)))
	}
	poll.True(t, wait, "all buffered", func() bool { return l.State().Buffered == n })
	if q := l.State().QueuedBytes; q != 0 {
		t.Fatalf("QueuedBytes %d with everything in the gate buffer", q)
	}
	close(gate)
	poll.True(t, wait, "all applied", func() bool { return h.count() == n })
}

// TestOversizedBatchIsDelivered: a batch larger than QueueBytes counts as the whole budget
// instead of waiting forever for room it can never have.
func TestOversizedBatchIsDelivered(t *testing.T) {
	p := newTestPub(t, pubOpts{})
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h, QueueBytes: 100})
	p.waitSubscribed()
	poll.True(t, wait, "active", func() bool { return l.State().Status == StatusActive })
	p.publish(strings.Repeat("y", 1000))
	p.publish("small")
	poll.True(t, wait, "both applied", func() bool { return h.count() == 2 })
	poll.True(t, wait, "budget empty", func() bool { return l.State().QueuedBytes == 0 })
}
