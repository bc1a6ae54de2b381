package mockworker

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/kvlisten"
	"github.com/kvselect/kvselect/internal/poll"
)

// applied is one Handler.Apply call.
type applied struct {
	seq      uint64
	payload  []byte
	replayed bool
}

// recorder is a kvlisten.Handler that records every call; safe for concurrent inspection.
type recorder struct {
	mu       sync.Mutex
	applies  []applied
	restarts [][2]uint64
}

func (r *recorder) Apply(seq uint64, payload []byte, replayed bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applies = append(r.applies, applied{seq, payload, replayed})
	return nil
}

func (r *recorder) Restarted(prev, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts = append(r.restarts, [2]uint64{prev, seq})
}

func (r *recorder) snapshot() ([]applied, [][2]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applies), slices.Clone(r.restarts)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applies)
}

// follow starts kvselect's listener on rank 0 of w with fast test timings.
func follow(t *testing.T, w *Worker, h kvlisten.Handler) *kvlisten.Listener {
	t.Helper()
	l, err := kvlisten.Start(context.Background(), kvlisten.Config{
		Endpoint: w.Endpoints()[0], ReplayEndpoint: w.ReplayEndpoints()[0], Handler: h,
		Logger: testLogger(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		ReplayTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func serveN(t *testing.T, w *Worker, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(uint32(i)*1000, 8)}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkApplied requires seqs 0..n-1 applied once each, in order, with the published bytes,
// and replayed exactly for the seqs in replayed.
func checkApplied(t *testing.T, w *Worker, got []applied, n int, replayed map[uint64]bool) {
	t.Helper()
	recs, _ := w.Published(0, 0)
	if len(got) != n || len(recs) != n {
		t.Fatalf("%d applied, %d published, want %d", len(got), len(recs), n)
	}
	for i, a := range got {
		if a.seq != uint64(i) || !bytes.Equal(a.payload, recs[i].Payload) || a.replayed != replayed[a.seq] {
			t.Fatalf("apply %d: seq %d replayed %v (payload equal %v)", i, a.seq, a.replayed, bytes.Equal(a.payload, recs[i].Payload))
		}
	}
}

func newReplayWorker(t *testing.T) *Worker {
	return newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 1024, ReplayEndpoint: "tcp://127.0.0.1:0", Clock: NewInstantClock(epoch0)})
}

// TestListenerRepairsGapByReplay: live batches lost on the way (DropLive) are detected by
// kvselect's listener as a gap and fetched from the mock's replay ROUTER, in order.
func TestListenerRepairsGapByReplay(t *testing.T) {
	w := newReplayWorker(t)
	rec := &recorder{}
	l := follow(t, w, rec)
	poll.True(t, poll.Generous, "listener subscribed", func() bool { return w.Subscribed(0) })
	serveN(t, w, 0, 1)
	poll.True(t, poll.Generous, "first batch", func() bool { return rec.count() == 1 })
	if err := w.DropLive(0, 2); err != nil {
		t.Fatal(err)
	}
	serveN(t, w, 1, 3) // seq 1, 2 dropped; seq 3 live reveals the gap
	poll.True(t, poll.Generous, "gap repaired", func() bool { return rec.count() == 4 })
	got, _ := rec.snapshot()
	checkApplied(t, w, got, 4, map[uint64]bool{1: true, 2: true})
	st := l.State()
	if st.Gaps != 1 || st.Lost != 0 || st.Replayed != 2 || w.Stats()[0].Publisher.DroppedLive != 2 {
		t.Fatalf("listener %+v, publisher %+v", st, w.Stats()[0].Publisher)
	}
}

// TestListenerCatchesUpAfterLateJoin: batches published before the listener subscribed
// (the slow-joiner loss) are replayed from 0 when the first live batch arrives.
func TestListenerCatchesUpAfterLateJoin(t *testing.T) {
	w := newReplayWorker(t)
	serveN(t, w, 0, 3)
	rec := &recorder{}
	follow(t, w, rec)
	poll.True(t, poll.Generous, "listener subscribed", func() bool { return w.Subscribed(0) })
	serveN(t, w, 3, 1)
	poll.True(t, poll.Generous, "catch-up", func() bool { return rec.count() == 4 })
	got, _ := rec.snapshot()
	checkApplied(t, w, got, 4, map[uint64]bool{0: true, 1: true, 2: true})
}

// TestListenerSeesRestart: after Restart the listener reconnects, sees seq 0 again and
// reports a publisher restart before applying the new incarnation's batches.
func TestListenerSeesRestart(t *testing.T) {
	w := newReplayWorker(t)
	rec := &recorder{}
	l := follow(t, w, rec)
	poll.True(t, poll.Generous, "listener subscribed", func() bool { return w.Subscribed(0) })
	serveN(t, w, 0, 3)
	poll.True(t, poll.Generous, "three batches", func() bool { return rec.count() == 3 })
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.Generous, "listener re-subscribed", func() bool { return w.Subscribed(0) })
	serveN(t, w, 10, 1)
	poll.True(t, poll.Generous, "post-restart batch", func() bool { return rec.count() == 4 })
	got, restarts := rec.snapshot()
	if len(restarts) != 1 || restarts[0] != [2]uint64{2, 0} {
		t.Fatalf("restarts %v, want [[2 0]]", restarts)
	}
	if got[3].seq != 0 || got[3].replayed {
		t.Fatalf("post-restart apply %+v, want live seq 0", got[3])
	}
	if st := l.State(); st.Restarts != 1 || st.Watermark != 0 {
		t.Fatalf("listener %+v", st)
	}
}
