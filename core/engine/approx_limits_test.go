package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// TestApproxBudget: the approximate index never holds more than ApproxMaxBlocks entries after
// a booking; pruning goes down to the ratio, earliest expiry first and deepest block first, so
// the newest booking's prefix stays whole and the oldest one's shrinks from its end; and
// re-booking the same prompt does not grow the expiry queue without bound.
func TestApproxBudget(t *testing.T) {
	cfg := *approxConfig()
	cfg.Limits.ApproxMaxBlocks, cfg.Limits.ApproxPruneRatio = 100, 0.8
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	a := e.parts[defKey].approx
	now := t0
	for i := range 12 {
		now = now.Add(time.Second)
		_, err := e.Reserve(&ReservationRequest{SelectionID: ptr(fmt.Sprint("b", i)), WorkerID: ptr(uint64(1 + i%2)), Prompt: Prompt{TokenIDs: toks(i*10_000, 30*4)}}, now)
		noErr(t, err)
		if n := len(a.deadline); n > 100 {
			t.Fatalf("booking %d: %d approximate entries, budget 100", i, n)
		}
	}
	st := e.LimitStats()
	if st.Counters.ApproxPrunes == 0 || st.ApproxBlocks < 80-30 || st.ApproxBlocks > 100 {
		t.Fatalf("stats %+v", st)
	}
	// The newest booking is matched whole; the oldest surviving one has a whole prefix.
	overlap := func(i int) uint64 {
		resp, err := e.Select(&SelectRequest{Prompt: Prompt{TokenIDs: toks(i*10_000, 30*4)}, AllowedWorkerIDs: []uint64{uint64(1 + i%2)}}, now)
		noErr(t, err)
		return resp.Overlap.LongestMatched / 4
	}
	if got := overlap(11); got != 30 {
		t.Fatalf("newest booking matches %d blocks, want 30", got)
	}
	// Prompts are disjoint and pruning leaves prefixes, so the matched prefixes add up to
	// every live entry.
	var sum uint64
	for i := range 12 {
		sum += overlap(i)
	}
	if sum != uint64(len(a.deadline)) {
		t.Fatalf("matched prefixes total %d blocks, %d entries live: pruning left holes", sum, len(a.deadline))
	}
	// Re-booking one prompt 200 times keeps the queue within twice the live entries (+slack).
	for i := range 200 {
		now = now.Add(time.Millisecond)
		id := fmt.Sprint("r", i)
		_, err := e.Reserve(&ReservationRequest{SelectionID: ptr(id), WorkerID: ptr(uint64(1)), Prompt: Prompt{TokenIDs: toks(0, 30*4)}}, now)
		noErr(t, err)
		noErr(t, e.Free(id))
	}
	if q := len(a.queue) - a.head; q > 2*len(a.deadline)+1024 {
		t.Fatalf("queue %d for %d live entries", q, len(a.deadline))
	}
}

// TestApproxPruneOrder: within one booking the deepest blocks go first, so what remains of
// it is a prefix.
func TestApproxPruneOrder(t *testing.T) {
	cfg := *approxConfig()
	cfg.Limits.ApproxMaxBlocks, cfg.Limits.ApproxPruneRatio = 40, 0.5
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	_, err := e.Reserve(&ReservationRequest{SelectionID: ptr("old"), WorkerID: ptr(uint64(1)), Prompt: Prompt{TokenIDs: toks(0, 30*4)}}, t0)
	noErr(t, err)
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("new"), WorkerID: ptr(uint64(1)), Prompt: Prompt{TokenIDs: toks(50_000, 15*4)}}, t0.Add(time.Second))
	noErr(t, err) // 45 entries > 40: prune to 20, all from "old", deepest first
	resp, err := e.Select(&SelectRequest{Prompt: Prompt{TokenIDs: toks(0, 30*4)}}, t0.Add(time.Second))
	noErr(t, err)
	if got := resp.Overlap.LongestMatched / 4; got != 5 {
		t.Fatalf("old booking keeps a %d-block prefix, want 5 (45 entries pruned to 20, 15 of them the new booking's)", got)
	}
	resp, err = e.Select(&SelectRequest{Prompt: Prompt{TokenIDs: toks(50_000, 15*4)}}, t0.Add(time.Second))
	noErr(t, err)
	if got := resp.Overlap.LongestMatched / 4; got != 15 {
		t.Fatalf("new booking matches %d blocks, want 15", got)
	}
}

// TestApproxSteps: a booking larger than one step records its first approxChunk blocks at
// once and the rest through ApproxWork, in steps, ending with the same index as one pass; a
// worker deleted meanwhile drops its backlog.
func TestApproxSteps(t *testing.T) {
	e := newEngine(t, approxConfig())
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	const blocks = 3*approxChunk + 100
	prompt := toks(0, blocks*4)
	_, err := e.Reserve(&ReservationRequest{SelectionID: ptr("big"), WorkerID: ptr(uint64(1)), Prompt: Prompt{TokenIDs: prompt}}, t0)
	noErr(t, err)
	matched := func() uint64 {
		resp, err := e.Select(&SelectRequest{Prompt: Prompt{TokenIDs: prompt}, AllowedWorkerIDs: []uint64{1}}, t0)
		noErr(t, err)
		return resp.Overlap.LongestMatched / 4
	}
	if got := matched(); got != approxChunk {
		t.Fatalf("after the booking %d blocks recorded, want the first step's %d", got, approxChunk)
	}
	steps := 0
	for e.ApproxWork(approxChunk) {
		steps++
	}
	if got := matched(); got != blocks || steps != 2 {
		t.Fatalf("after %d more steps %d blocks recorded, want %d after 2", steps, got, blocks)
	}
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("big2"), WorkerID: ptr(uint64(2)), Prompt: Prompt{TokenIDs: toks(1_000_000, blocks*4)}}, t0)
	noErr(t, err)
	if _, err := e.DeleteWorker(2); err != nil {
		t.Fatal(err)
	}
	for e.ApproxWork(approxChunk) {
	}
	if n := e.parts[defKey].index.OwnerEntries(kvwire.Owner{Worker: 2}); n != 0 {
		t.Fatalf("deleted worker's backlog recorded %d entries", n)
	}
}
