package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

// parkNow parks req as SelectWait does and returns its waiter without waiting on it; the request
// must have to wait.
func parkNow(svc *Service, req *SelectRequest, reserve bool) (*waiter, error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	_, t, err := svc.eng.SelectQueued(req, reserve, svc.clock())
	if err != nil || t == 0 {
		return nil, fmt.Errorf("not parked: %v", err)
	}
	w := &waiter{ticket: t, reserve: reserve, done: make(chan engine.Admission, 1)}
	svc.waiters[t] = w
	svc.flushLocked()
	return w, nil
}

// waiting is the number of callers the service holds for parked requests.
func waiting(svc *Service) int {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return len(svc.waiters)
}

// queueFixture is a service with router queueing at 0.5 × 100 prefill tokens on one worker
// (block size 4): a booking of more than 50 uncached tokens makes the only rank busy. policy,
// when set, is the queue order.
func queueFixture(t *testing.T, policy string) *Service {
	t.Helper()
	return queueService(t, func(c *engine.Config) {
		c.QueueThreshold = ptr(0.5)
		if policy != "" {
			c.QueuePolicy = policy
		}
	})
}

// queueService is a service (kvselect policy, KV events off) with one worker of 100 prefill
// tokens' capacity and block size 4, configured further by edit.
func queueService(t *testing.T, edit func(*engine.Config)) *Service {
	t.Helper()
	cfg := engine.KVSelectDefaults()
	cfg.UseKVEvents = false
	edit(&cfg)
	svc, err := New(Config{Engine: cfg, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if _, err := svc.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(1)), Endpoint: ptr("http://w1"), BlockSize: ptr(uint32(4)),
		MaxNumBatchedTokens: ptr(uint64(100))}); err != nil {
		t.Fatal(err)
	}
	return svc
}

// twoWorkers is queueFixture with a second worker of the same capacity.
func twoWorkers(t *testing.T) *Service {
	t.Helper()
	svc := queueFixture(t, "")
	if _, err := svc.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(2)), Endpoint: ptr("http://w2"), BlockSize: ptr(uint32(4)),
		MaxNumBatchedTokens: ptr(uint64(100))}); err != nil {
		t.Fatal(err)
	}
	return svc
}

// busy books id on worker w with 60 prefill tokens (> 50: the rank is busy).
func busy(t *testing.T, svc *Service, id string, w uint64) {
	t.Helper()
	if _, err := svc.Reserve(&ReservationRequest{SelectionID: ptr(id), WorkerID: ptr(w),
		Prompt: engine.Prompt{SequenceHashes: []int64{}, ISLTokens: ptr(uint64(60))}, EffectivePrefillTokens: ptr(uint64(60))}); err != nil {
		t.Fatal(err)
	}
}

// tokens returns n distinct tokens starting at base (nothing cached: all of them are prefill).
func tokens(base, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(base + i)
	}
	return out
}

func selReq(id string, base, n int) *SelectRequest {
	return &SelectRequest{SelectionID: ptr(id), Prompt: engine.Prompt{TokenIDs: tokens(base, n)}}
}

// outcome is one waiting caller's result.
type outcome struct {
	id   string
	resp *SelectResponse
	err  error
}

// wait starts a waiting select_and_reserve (or select) and returns where its outcome arrives.
func wait(ctx context.Context, svc *Service, req *SelectRequest, reserve bool, out chan<- outcome) {
	go func() {
		var resp *SelectResponse
		var err error
		if reserve {
			resp, err = svc.SelectAndReserveWait(ctx, req)
		} else {
			resp, err = svc.SelectWait(ctx, req)
		}
		out <- outcome{*req.SelectionID, resp, err}
	}()
}

// recv returns the next outcome, failing the test if none arrives within queueWait.
func recv(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(queueWait):
		t.Fatal("no outcome within the deadline")
		return outcome{}
	}
}

func pendingIs(svc *Service, n int) func() bool {
	return func() bool { return svc.Stats().Queue.Pending == n }
}

const queueWait = poll.Generous

func TestQueueParksAndDispatchesInOrder(t *testing.T) {
	svc := queueFixture(t, "")
	ctx := t.Context()
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	// The only rank is busy: the immediate API refuses with 429 …
	if _, err := svc.SelectAndReserve(selReq("now", 1000, 8)); !errors.Is(err, engine.ErrOverloaded) {
		t.Fatalf("immediate select_and_reserve on a busy fleet: %v, want ErrOverloaded", err)
	}
	// … and the waiting API parks. Every request here but the plain select q3 books more than
	// 50 tokens, so each dispatch makes the rank busy again and the order is observable.
	out := make(chan outcome, 4)
	wait(ctx, svc, selReq("q1", 2000, 60), true, out)
	poll.True(t, queueWait, "q1 parked", pendingIs(svc, 1))
	wait(ctx, svc, selReq("q2", 3000, 60), true, out)
	poll.True(t, queueWait, "q2 parked", pendingIs(svc, 2))
	wait(ctx, svc, selReq("q3", 4000, 8), false, out)
	poll.True(t, queueWait, "q3 parked", pendingIs(svc, 3))

	next := func(want string, booked bool) {
		t.Helper()
		o := recv(t, out)
		if o.id != want || o.err != nil || (o.resp.Booked != nil) != booked {
			t.Fatalf("got %+v, want %s dispatched (booked %v)", o, want, booked)
		}
	}
	// big's prefill completes: only q1 fits before the rank is busy again.
	if err := svc.PrefillComplete("big"); err != nil {
		t.Fatal(err)
	}
	next("q1", true)
	if st := svc.Stats().Queue; st.Pending != 2 || st.Dispatched != 1 {
		t.Fatalf("after q1: %+v", st)
	}
	// No bypass: a newcomer parks behind q2 and q3 although nothing else changed.
	wait(ctx, svc, selReq("q4", 5000, 60), true, out)
	poll.True(t, queueWait, "q4 parked", pendingIs(svc, 3))

	if err := svc.PrefillComplete("q1"); err != nil {
		t.Fatal(err)
	}
	next("q2", true)
	// q3 books nothing, so q4 follows it in the same dispatch round.
	if err := svc.PrefillComplete("q2"); err != nil {
		t.Fatal(err)
	}
	got := map[string]outcome{}
	for range 2 {
		o := recv(t, out)
		got[o.id] = o
	}
	if o := got["q3"]; o.err != nil || o.resp == nil || o.resp.Booked != nil {
		t.Fatalf("q3: %+v", o)
	}
	if o := got["q4"]; o.err != nil || o.resp == nil || o.resp.Booked == nil {
		t.Fatalf("q4: %+v", o)
	}
	if st := svc.Stats().Queue; st.Pending != 0 || st.Dispatched != 4 || st.Abandoned != 0 {
		t.Fatalf("final %+v", st)
	}
	// Every booking is live; the plain select booked nothing.
	for _, id := range []string{"q1", "q2", "q4"} {
		if err := svc.Free(id); err != nil {
			t.Fatalf("free %s: %v", id, err)
		}
	}
	if err := svc.Free("q3"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("free of the plain select: %v, want not found", err)
	}
}

func TestQueueCancelLeavesNothing(t *testing.T) {
	svc := queueFixture(t, "")
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan outcome, 2)
	wait(ctx, svc, selReq("gone", 1000, 8), true, out)
	poll.True(t, queueWait, "parked", pendingIs(svc, 1))
	wait(t.Context(), svc, selReq("next", 2000, 8), true, out)
	poll.True(t, queueWait, "second parked", pendingIs(svc, 2))
	cancel()
	if o := recv(t, out); o.id != "gone" || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled caller got %+v", o)
	}
	if st := svc.Stats().Queue; st.Pending != 1 || st.Abandoned != 1 || waiting(svc) != 1 {
		t.Fatalf("after cancel %+v (%d callers waiting)", st, waiting(svc))
	}
	if err := svc.Free("gone"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a cancelled parked request must not be booked: %v", err)
	}
	if err := svc.Free("big"); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, out); o.id != "next" || o.err != nil {
		t.Fatalf("the request behind the cancelled one: %+v", o)
	}
}

// TestQueueAbandonAfterDispatchFreesBooking: a caller that goes away between its dispatch and
// reading the outcome has its booking released (nobody will send the request to the worker).
func TestQueueAbandonAfterDispatchFreesBooking(t *testing.T) {
	svc := queueFixture(t, "")
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	w, err := parkNow(svc, selReq("late", 1000, 8), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Free("big"); err != nil { // dispatches "late"; nobody reads its outcome yet
		t.Fatal(err)
	}
	svc.mu.Lock()
	booked := svc.eng.HasReservation("late")
	svc.mu.Unlock()
	if !booked {
		t.Fatal("dispatch must book")
	}
	if err := svc.abandon(w, context.Canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandon returned %v", err)
	}
	if err := svc.Free("late"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the abandoned booking must be freed: %v", err)
	}
}

// TestQueueNewHeadDispatchedAtOnce: a newcomer that sorts ahead of a head which cannot go (its
// allowed worker is busy) is dispatched as soon as it parks when it can go, not at the next
// load change.
func TestQueueNewHeadDispatchedAtOnce(t *testing.T) {
	svc := twoWorkers(t)
	busy(t, svc, "big1", 1)
	busy(t, svc, "big2", 2)
	out := make(chan outcome, 2)
	only1 := selReq("only1", 1000, 8)
	only1.AllowedWorkerIDs = []uint64{1}
	wait(t.Context(), svc, only1, true, out)
	poll.True(t, queueWait, "only1 parked", pendingIs(svc, 1))
	if err := svc.Free("big2"); err != nil { // worker 2 has room, but only1 may not use it
		t.Fatal(err)
	}
	if st := svc.Stats().Queue; st.Pending != 1 {
		t.Fatalf("only1 must still wait: %+v", st)
	}
	urgent := selReq("urgent", 2000, 8)
	urgent.StrictPriority = ptr(uint32(1))
	wait(t.Context(), svc, urgent, true, out)
	if o := recv(t, out); o.id != "urgent" || o.err != nil || o.resp.WorkerID != 2 {
		t.Fatalf("urgent: %+v", o)
	}
	// A parked id cannot be booked by the immediate API either.
	if _, err := svc.SelectAndReserve(selReq("only1", 3000, 8)); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("immediate booking of a parked id: %v", err)
	}
}

func TestQueueRejectsAtParkTime(t *testing.T) {
	svc := queueFixture(t, "")
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 1)
	wait(t.Context(), svc, selReq("dup", 1000, 8), true, out)
	poll.True(t, queueWait, "parked", pendingIs(svc, 1))
	cases := []struct {
		name string
		req  *SelectRequest
		kind error
	}{
		{"duplicate of a parked id", selReq("dup", 2000, 8), engine.ErrConflict},
		{"duplicate of a booking", selReq("big", 2000, 8), engine.ErrConflict},
		{"no prompt", &SelectRequest{SelectionID: ptr("bad")}, engine.ErrBadRequest},
		{"unknown partition", &SelectRequest{SelectionID: ptr("p"), ModelName: ptr("other"), Prompt: engine.Prompt{TokenIDs: tokens(0, 4)}}, engine.ErrNotReady},
	}
	for _, tc := range cases {
		if _, err := svc.SelectAndReserveWait(t.Context(), tc.req); !errors.Is(err, tc.kind) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if st := svc.Stats().Queue; st.Pending != 1 {
		t.Fatalf("rejected requests must not park: %+v", st)
	}
	// Advisory selections never wait.
	adv := selReq("adv", 3000, 8)
	adv.Advisory = true
	if _, err := svc.SelectWait(t.Context(), adv); err != nil {
		t.Fatalf("advisory: %v", err)
	}
}

// TestQueuePinnedLane: a request pinned to a busy rank waits in that rank's lane while other
// requests keep using the free rank, and goes as soon as its rank has room.
func TestQueuePinnedLane(t *testing.T) {
	svc := twoWorkers(t)
	busy(t, svc, "big1", 1)
	pinTo1 := func(id string, base int) *SelectRequest {
		r := selReq(id, base, 8)
		r.PinnedWorker = &engine.PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
		return r
	}
	// The immediate API refuses a pinned request whose rank is busy …
	if _, err := svc.SelectAndReserve(pinTo1("now", 100)); !errors.Is(err, engine.ErrOverloaded) {
		t.Fatalf("immediate pinned to a busy rank: %v", err)
	}
	// … the waiting API parks it, and another behind it in the same lane.
	out := make(chan outcome, 2)
	wait(t.Context(), svc, pinTo1("p1", 200), true, out)
	poll.True(t, queueWait, "p1 parked", pendingIs(svc, 1))
	wait(t.Context(), svc, pinTo1("p2", 300), true, out)
	poll.True(t, queueWait, "p2 parked", pendingIs(svc, 2))
	// Unpinned requests are not held back by the lane: worker 2 has room, so the pool is not
	// busy and they are served at once (the cost picks the rank).
	for i := range 3 {
		if _, err := svc.SelectAndReserveWait(t.Context(), selReq(fmt.Sprint("free", i), 1000+100*i, 8)); err != nil {
			t.Fatalf("unpinned request %d: %v", i, err)
		}
	}
	if st := svc.Stats().Queue; st.Pending != 2 {
		t.Fatalf("only the pinned requests wait: %+v", st)
	}
	if err := svc.PrefillComplete("big1"); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for range 2 {
		o := recv(t, out)
		if o.err != nil {
			t.Fatalf("%s: %v", o.id, o.err)
		}
		got[o.id] = o.resp.WorkerID
	}
	if got["p1"] != 1 || got["p2"] != 1 {
		t.Fatalf("pinned requests went to %v, want worker 1", got)
	}
}

func TestQueueCloseFailsWaiters(t *testing.T) {
	svc := queueFixture(t, "")
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 2)
	wait(t.Context(), svc, selReq("a", 1000, 8), true, out)
	wait(t.Context(), svc, selReq("b", 2000, 8), false, out)
	poll.True(t, queueWait, "parked", pendingIs(svc, 2))
	_ = svc.Close()
	for range 2 {
		if o := recv(t, out); !errors.Is(o.err, engine.ErrNotReady) || o.err.Error() != "selection service is shutting down" {
			t.Fatalf("%s after Close: %v", o.id, o.err)
		}
	}
}

// TestQueueWSPTServesShortWorkFirst: with wspt, of two parked requests the one with less
// uncached work is dispatched first even though it came second.
func TestQueueWSPTServesShortWorkFirst(t *testing.T) {
	svc := queueFixture(t, "wspt")
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 2)
	wait(t.Context(), svc, selReq("long", 1000, 80), true, out)
	poll.True(t, queueWait, "long parked", pendingIs(svc, 1))
	wait(t.Context(), svc, selReq("short", 2000, 52), true, out)
	poll.True(t, queueWait, "short parked", pendingIs(svc, 2))
	// Each dispatch books more than 50 tokens, so one request leaves per completed prefill.
	for _, step := range []struct{ done, want string }{{"big", "short"}, {"short", "long"}} {
		if err := svc.PrefillComplete(step.done); err != nil {
			t.Fatal(err)
		}
		if o := recv(t, out); o.id != step.want || o.err != nil {
			t.Fatalf("got %+v, want %s", o, step.want)
		}
	}
}
