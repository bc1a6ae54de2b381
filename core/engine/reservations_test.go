package engine

// Reservation tests: the explicit form's table and the pending-selection cache's bounds and
// generation rule. The replay form, its retries and the lifecycle calls are scripts
// (testdata/reservations.txt, pending_ttl.txt, lifecycle.txt).

import (
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// replay is the minimal replay-form reservation.
func replay(id string) *ReservationRequest { return &ReservationRequest{SelectionID: ptr(id)} }

// TestPendingCacheBounds: the count, byte and age bounds evict oldest first; an entry is alive
// at exactly the TTL and gone a nanosecond later.
func TestPendingCacheBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SelectionCacheMaxEntries = 2
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	for _, id := range []string{"a", "b", "c"} {
		_, err := e.Select(selReq(id, toks(0, 16)), t0)
		noErr(t, err)
	}
	if e.PendingSelections() != 2 {
		t.Fatalf("%d entries, want 2", e.PendingSelections())
	}
	_, err := e.Reserve(replay("a"), t0)
	wantErr(t, err, ErrNotFound)
	_, err = e.Reserve(replay("b"), t0)
	noErr(t, err)

	// Bytes: a 4-block entry with a one-letter id in the default partition charges
	// 8·4 + 8·4 + 1 + 7 + 7 + 432 (fixed overhead, pending.go) = 511 bytes.
	cfg = DefaultConfig()
	cfg.SelectionCacheMaxBytes = 600
	e = newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	_, _ = e.Select(selReq("x", toks(0, 16)), t0)
	if e.pending.bytes != 511 {
		t.Fatalf("entry charged %d bytes, want 511", e.pending.bytes)
	}
	_, _ = e.Select(selReq("x", toks(0, 16)), t0) // replacing frees the old bytes
	if e.pending.bytes != 511 || e.PendingSelections() != 1 {
		t.Fatalf("replacement: %d bytes, %d entries", e.pending.bytes, e.PendingSelections())
	}
	_, _ = e.Select(selReq("y", toks(0, 16)), t0)
	if e.PendingSelections() != 1 {
		t.Fatalf("byte budget not enforced: %d entries", e.PendingSelections())
	}
	_, _ = e.Select(selReq("big", toks(0, 80)), t0)
	if e.PendingSelections() != 0 || e.pending.bytes != 0 {
		t.Fatalf("an over-budget entry must evict itself: %d entries, %d bytes", e.PendingSelections(), e.pending.bytes)
	}

	// Age: peek treats entries older than the TTL as absent; age == TTL is still alive.
	e = newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	_, _ = e.Select(selReq("old", toks(0, 16)), t0)
	_, _ = e.Select(selReq("edge", toks(0, 16)), t0)
	_, err = e.Reserve(replay("edge"), t0.Add(120*time.Second))
	noErr(t, err)
	_, err = e.Reserve(replay("old"), t0.Add(120*time.Second+1))
	wantErr(t, err, ErrNotFound)
	_, _ = e.Select(selReq("swept", toks(0, 16)), t0)
	e.Sweep(t0.Add(121 * time.Second))
	if e.PendingSelections() != 0 {
		t.Fatalf("Sweep kept %d stale entries", e.PendingSelections())
	}
}

// TestPendingGeneration: consuming an older generation leaves a newer selection of the same id
// in place.
func TestPendingGeneration(t *testing.T) {
	c := newPendingCache(time.Minute, 10, 1<<20)
	c.insert(t0, &pendingSelection{key: defKey, id: "s"})
	_, gen1 := c.peek(defKey, "s", t0)
	c.insert(t0, &pendingSelection{key: defKey, id: "s"})
	ps, gen2 := c.peek(defKey, "s", t0)
	if gen2 <= gen1 || ps == nil {
		t.Fatalf("generations %d then %d", gen1, gen2)
	}
	c.consume(defKey, "s", gen1)
	if c.len() != 1 {
		t.Fatalf("stale consume removed the newer selection")
	}
	c.consume(defKey, "s", gen2)
	if c.len() != 0 || c.bytes != 0 {
		t.Fatalf("consume left %d entries, %d bytes", c.len(), c.bytes)
	}
	if ps, _ := c.peek(PartitionKey{Model: "m"}, "s", t0); ps != nil {
		t.Fatalf("peek across partitions")
	}
}

// TestReserveExplicit covers the explicit form's errors and its prefill-tracking rules.
func TestReserveExplicit(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(0, 2)))
	_, _ = e.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(5))}) // incomplete
	prompt := toks(0, 40)
	store(t, e, kvwire.Owner{Worker: 1}, prompt[:16]) // rank 0 caches 4 blocks = 16 tokens

	// Every refusal leaves no row and publishes nothing.
	errs := []struct {
		name string
		req  ReservationRequest
		kind error
		want string
	}{
		{"unknown worker", ReservationRequest{WorkerID: ptr(uint64(9))}, ErrNotFound, "schedulable worker 9 not found for model=default routing_group=default"},
		{"incomplete worker", ReservationRequest{WorkerID: ptr(uint64(5))}, ErrNotFound, "schedulable worker 5 not found"},
		{"rank outside range", ReservationRequest{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(2))}, ErrNotFound, "schedulable worker 1 (dp_rank 2) not found for model=default routing_group=default"},
		{"prefill above isl", ReservationRequest{WorkerID: ptr(uint64(1)), EffectivePrefillTokens: ptr(uint64(41))}, ErrBadRequest, "effective_prefill_tokens (41) must not exceed isl_tokens (40)"},
		{"other partition not ready", ReservationRequest{WorkerID: ptr(uint64(1)), ModelName: ptr("nope")}, ErrNotReady, "no schedulable workers for model=nope"},
		{"hash path needs isl", ReservationRequest{WorkerID: ptr(uint64(1)), Prompt: Prompt{SequenceHashes: []int64{1}}}, ErrBadRequest, "isl_tokens is required"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.SelectionID = ptr("bad")
			if req.Prompt.SequenceHashes == nil {
				req.Prompt = tokenPrompt(prompt)
			}
			_, err := e.Reserve(&req, t0)
			wantErr(t, err, tc.kind, tc.want)
			if len(e.resv) != 0 || len(e.TakeEffects(nil)) != 0 {
				t.Fatalf("refused reservation changed state")
			}
		})
	}

	// Spec §2.6: track = track_prefill_tokens ?? (effective_prefill_tokens given || override ??
	// config); the load is the hint when given, else isl − cached tokens on the booked rank.
	off := &ConfigOverride{TrackPrefillTokens: ptr(false)}
	tracking := []struct {
		name      string
		rank      *uint32
		ept       *uint64
		track     *bool
		override  *ConfigOverride
		wantTrack bool
		wantLoad  uint64
	}{
		{"config tracks: isl minus cached on rank 0", nil, nil, nil, nil, true, 40 - 16},
		{"config tracks: nothing cached on rank 1", ptr(uint32(1)), nil, nil, nil, true, 40},
		{"override off, no hint", nil, nil, nil, off, false, 0},
		{"hint enables tracking despite override", nil, ptr(uint64(7)), nil, off, true, 7},
		{"hint with tracking off", nil, ptr(uint64(7)), ptr(false), nil, false, 0},
		{"explicit tracking without hint", nil, nil, ptr(true), off, true, 24},
		{"zero hint is tracked but adds nothing", nil, ptr(uint64(0)), nil, nil, true, 0},
	}
	for _, tc := range tracking {
		t.Run(tc.name, func(t *testing.T) {
			req := &ReservationRequest{SelectionID: ptr("t"), WorkerID: ptr(uint64(1)), DPRank: tc.rank, Prompt: tokenPrompt(prompt),
				EffectivePrefillTokens: tc.ept, TrackPrefillTokens: tc.track, RouterConfigOverride: tc.override}
			resp, err := e.Reserve(req, t0)
			noErr(t, err)
			o := kvwire.Owner{Worker: 1, Rank: deref(tc.rank, 0)}
			if resp.WorkerID != 1 || resp.DPRank != o.Rank || resp.Endpoint != "http://w1:8000" {
				t.Fatalf("response %+v", resp)
			}
			if l := loadOf(e, defKey, o); l.PotentialPrefillTokens != tc.wantLoad || l.ActiveRequests != 1 {
				t.Fatalf("load %+v, want prefill %d", l, tc.wantLoad)
			}
			fx := e.TakeEffects(nil)
			if len(fx) != 1 || fx[0].Add.TrackPrefill != tc.wantTrack || fx[0].Add.PrefillTokens != tc.wantLoad || fx[0].Owner != o {
				t.Fatalf("effect %+v / %+v", fx, fx[0].Add)
			}
			noErr(t, e.Free("t"))
			_ = e.TakeEffects(nil)
		})
	}

	// Hash path: sequence_hashes and isl suffice.
	_, err := e.Reserve(&ReservationRequest{SelectionID: ptr("h"), WorkerID: ptr(uint64(1)),
		Prompt: Prompt{SequenceHashes: []int64{1, 2, 3}, ISLTokens: ptr(uint64(12))}}, t0)
	noErr(t, err)
	if l := loadOf(e, defKey, kvwire.Owner{Worker: 1}); triple(l) != "(1,3,12)" {
		t.Fatalf("hash-path booking %s", triple(l))
	}
}
