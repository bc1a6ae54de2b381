package engine

// Reservation tests: POST /reservations in both forms (spec §2.6, §7), the lifecycle calls and
// their 404/400 paths (§2.7), and the pending-selection cache's bounds and generation rule.

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// replay is the minimal replay-form reservation.
func replay(id string) *ReservationRequest { return &ReservationRequest{SelectionID: ptr(id)} }

// TestReserveReplay covers the cached replay form: miss, consume, latest wins, pure replay,
// explicit discard and 409 with the entry kept.
func TestReserveReplay(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	prompt := toks(0, 16)

	// Request-level 422s come before any lookup.
	_, err := e.Reserve(&ReservationRequest{}, t0)
	wantErr(t, err, ErrUnprocessable, "missing field `selection_id`")
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("p"), RouterConfigOverride: &ConfigOverride{PrefillLoadScale: ptr(-1.0)}}, t0)
	wantErr(t, err, ErrUnprocessable, "prefill_load_scale")
	_, err = e.Reserve(replay("p"), t0)
	wantErr(t, err, ErrNotFound, "no pending selection p for model=default routing_group=default (expired, already used, or never selected)")

	_, err = e.Select(selReq("", prompt), t0)
	noErr(t, err)
	if e.PendingSelections() != 0 {
		t.Fatalf("a select without selection_id was cached")
	}
	sel, err := e.Select(selReq("p", prompt), t0)
	noErr(t, err)
	if e.PendingSelections() != 1 || len(e.TakeEffects(nil)) != 0 {
		t.Fatalf("select must cache without effects")
	}
	// The cache is keyed by (model_name, routing_group, selection_id).
	wrong := replay("p")
	wrong.ModelName = ptr("other")
	_, err = e.Reserve(wrong, t0)
	wantErr(t, err, ErrNotFound, "no pending selection p for model=other routing_group=default")

	// Pure replay: the prompt in the request is ignored.
	req := replay("p")
	req.Prompt = tokenPrompt(toks(500, 64))
	resp, err := e.Reserve(req, t0)
	noErr(t, err)
	if *resp != (ReservationResponse{SelectionID: "p", ModelName: DefaultName, RoutingGroup: DefaultName, WorkerID: sel.WorkerID, DPRank: sel.DPRank, Endpoint: "http://w1:8000"}) {
		t.Fatalf("response %+v", resp)
	}
	if e.PendingSelections() != 0 {
		t.Fatalf("a successful replay must consume the entry")
	}
	if l := loadOf(e, defKey, kvwire.Owner{Worker: 1}); triple(l) != "(1,4,16)" {
		t.Fatalf("replayed booking load %s, want (1,4,16)", triple(l))
	}
	// The replayed admission is published like any booking, with the cached inputs.
	fx := e.TakeEffects(nil)
	if len(fx) != 1 || fx[0].Kind != LifecycleAdd || fx[0].RequestID != "p" || fx[0].Add.ISL != 16 || fx[0].Add.PrefillTokens != 16 ||
		!slices.Equal(fx[0].Add.TokenSequence, goldenVectors[0].seq) {
		t.Fatalf("effects %+v", fx)
	}
	_, err = e.Reserve(replay("p"), t0)
	wantErr(t, err, ErrNotFound, "no pending selection p")

	// Latest select wins; the track_prefill_tokens override is captured and replayed.
	_, _ = e.Select(selReq("q", toks(0, 4)), t0)
	r := selReq("q", toks(0, 8))
	r.RouterConfigOverride = &ConfigOverride{TrackPrefillTokens: ptr(false)}
	_, _ = e.Select(r, t0)
	_, err = e.Reserve(replay("q"), t0)
	noErr(t, err)
	fx = e.TakeEffects(nil)
	if len(fx) != 1 || len(fx[0].Add.TokenSequence) != 2 || fx[0].Add.TrackPrefill || fx[0].Add.PrefillTokens != 0 {
		t.Fatalf("latest-wins replay booked %+v", fx[0].Add)
	}

	// An explicit booking discards the cached selection of its id.
	_, _ = e.Select(selReq("x", prompt), t0)
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("x"), WorkerID: ptr(uint64(1)), Prompt: tokenPrompt(prompt)}, t0)
	noErr(t, err)
	noErr(t, e.Free("x"))
	_, err = e.Reserve(replay("x"), t0)
	wantErr(t, err, ErrNotFound, "no pending selection x")

	// A duplicate booking is a 409 and the entry stays for a retry.
	_, _ = e.Select(selReq("d", prompt), t0)
	_, err = e.SelectAndReserve(selReq("d", prompt), t0)
	noErr(t, err)
	_, err = e.Reserve(replay("d"), t0)
	wantErr(t, err, ErrConflict, "selection d is already reserved or being reserved")
	noErr(t, e.Free("d"))
	_, err = e.Reserve(replay("d"), t0)
	noErr(t, err)
}

// TestReserveReplayRetry: a replay whose cached rank is no longer schedulable fails with 404
// and keeps the entry, so the same call succeeds once the rank is back.
func TestReserveReplayRetry(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(0, 2)))
	mustUpsert(t, e, spec(2))
	r := selReq("r", toks(0, 8))
	r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(1))}
	_, err := e.Select(r, t0)
	noErr(t, err)

	// PATCH-like shrink of the DP range: rank 1 is gone, worker 2 keeps the partition ready.
	mustUpsert(t, e, spec(1, dp(0, 1)))
	_, err = e.Reserve(replay("r"), t0)
	wantErr(t, err, ErrNotFound, "schedulable worker 1 (dp_rank 1) not found for model=default routing_group=default")
	if e.PendingSelections() != 1 {
		t.Fatalf("failed replay dropped the entry")
	}
	mustUpsert(t, e, spec(1, dp(0, 2)))
	resp, err := e.Reserve(replay("r"), t0)
	noErr(t, err)
	if resp.WorkerID != 1 || resp.DPRank != 1 {
		t.Fatalf("retry booked %+v", resp)
	}
}

// TestReserveReplayPartitionNotReady: while the partition has no schedulable worker the replay
// is a 503 and the entry is kept (spec §2.6); it books once the worker is back.
func TestReserveReplayPartitionNotReady(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	_, err := e.Select(selReq("g", toks(0, 8)), t0)
	noErr(t, err)
	// Deleting the only worker removes the partition; the cached selection must survive it.
	_, err = e.DeleteWorker(1)
	noErr(t, err)
	_, err = e.Reserve(replay("g"), t0)
	wantErr(t, err, ErrNotReady, "no schedulable workers")
	mustUpsert(t, e, spec(1))
	_, err = e.Reserve(replay("g"), t0)
	noErr(t, err)
}

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

// TestLifecycleCalls covers prefill_complete, output_block and free, including their 404s,
// decay validation before lookup, republished completions and local-only output blocks.
func TestLifecycleCalls(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	for _, f := range []func(string) error{e.PrefillComplete, e.Free, func(id string) error { return e.OutputBlock(id, nil) }} {
		wantErr(t, f("ghost"), ErrNotFound, "reservation ghost not found")
	}
	// decay_fraction is validated before the lookup: a bad value on an unknown id is a 400.
	for _, bad := range []float64{-0.1, 1.0001, math.NaN(), math.Inf(1)} {
		wantErr(t, e.OutputBlock("ghost", &bad), ErrBadRequest, "decay_fraction must be between 0.0 and 1.0")
	}

	_, err := e.SelectAndReserve(selReq("a", toks(0, 16)), t0)
	noErr(t, err)
	_ = e.TakeEffects(nil)
	o := kvwire.Owner{Worker: 1}
	if got := triple(loadOf(e, defKey, o)); got != "(1,4,16)" {
		t.Fatalf("booked %s", got)
	}
	noErr(t, e.PrefillComplete("a"))
	noErr(t, e.PrefillComplete("a")) // repeat: harmless, republished
	if got := triple(loadOf(e, defKey, o)); got != "(1,4,0)" {
		t.Fatalf("after prefill_complete %s", got)
	}
	noErr(t, e.OutputBlock("a", nil))
	noErr(t, e.OutputBlock("a", nil))
	if got := triple(loadOf(e, defKey, o)); got != "(1,6,0)" {
		t.Fatalf("after two output blocks %s", got)
	}
	// With decay 0 every block the booking owns alone (4 prompt + 3 output) weighs nothing.
	noErr(t, e.OutputBlock("a", ptr(0.0)))
	if got := triple(loadOf(e, defKey, o)); got != "(1,0,0)" {
		t.Fatalf("decay 0 must zero every exclusive block: %s", got)
	}
	noErr(t, e.OutputBlock("a", ptr(1.0)))
	fx := e.TakeEffects(nil)
	if len(fx) != 2 || fx[0].Kind != LifecyclePrefillComplete || fx[1].Kind != LifecyclePrefillComplete {
		t.Fatalf("effects %+v, want two prefill completions and nothing for output blocks", fx)
	}
	noErr(t, e.Free("a"))
	if got := triple(loadOf(e, defKey, o)); got != "(0,0,0)" {
		t.Fatalf("after free %s", got)
	}
	wantErr(t, e.Free("a"), ErrNotFound)
	wantErr(t, e.PrefillComplete("a"), ErrNotFound)
	fx = e.TakeEffects(nil)
	if len(fx) != 1 || fx[0].Kind != LifecycleFree || fx[0].RequestID != "a" || fx[0].Owner != o || fx[0].BlockSize != 4 || fx[0].Partition != defKey {
		t.Fatalf("free effects %+v", fx)
	}
	if len(e.TakeEffects(nil)) != 0 {
		t.Fatalf("TakeEffects did not clear the outbox")
	}
}
