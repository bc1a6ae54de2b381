package mockworker

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/core/engine/kvhash"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvwire"
)

// TestEmittedBatches serves a scripted request sequence on a 6-block cache and decodes every
// published payload with kvselect's own decoder: the exact BlockStored / BlockRemoved sequence,
// parents, token ids, block size, medium, rank and sequence numbers are checked.
func TestEmittedBatches(t *testing.T) {
	const bs = 4
	w := newWorker(t, Config{BlockSize: bs, NumGPUBlocks: 6, Clock: NewInstantClock(epoch0), DPStartRank: 3})
	ctx := context.Background()
	seed := w.Config().HashSeed

	a := tokens(100, 3*bs+2) // 3 full blocks + a partial one
	ax := tokens(100, 5*bs)  // a extended to 5 blocks
	b := tokens(9000, 4*bs)  // unrelated, 4 blocks
	ha := EngineHashes(nil, ax, bs, seed)
	hb := EngineHashes(nil, b, bs, seed)

	serve := func(p []uint32) Result {
		t.Helper()
		res, err := w.Serve(ctx, Request{PromptTokenIDs: p, MaxTokens: intp(2)})
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		return res
	}
	if r := serve(a); r.CachedTokens != 0 || r.PromptTokens != len(a) || r.DPRank != 3 {
		t.Fatalf("first request: %+v", r)
	}
	if r := serve(a); r.CachedTokens != 3*bs {
		t.Fatalf("repeat: cached %d, want %d", r.CachedTokens, 3*bs)
	}
	if r := serve(ax); r.CachedTokens != 3*bs {
		t.Fatalf("extension: cached %d, want %d", r.CachedTokens, 3*bs)
	}
	serve(b) // needs 4 blocks; 5 cached, capacity 6 → evicts 3, deepest first
	if err := w.Reset(); err != nil {
		t.Fatalf("Reset: %v", err)
	}

	recs, err := w.Published(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Seq != uint64(i) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	got := decodeAll(t, recs)
	type ev struct {
		kind      kvevents.Kind
		hashes    []uint64
		parent    uint64
		hasParent bool
		tokens    []uint32
	}
	want := [][]ev{
		{{kind: kvevents.KindBlockStored, hashes: ha[:3], tokens: a[:3*bs]}},
		// the repeat stores nothing: no batch
		{{kind: kvevents.KindBlockStored, hashes: ha[3:5], parent: ha[2], hasParent: true, tokens: ax[3*bs:]}},
		{
			{kind: kvevents.KindBlockRemoved, hashes: []uint64{ha[4], ha[3], ha[2]}},
			{kind: kvevents.KindBlockStored, hashes: hb, tokens: b},
		},
		{{kind: kvevents.KindAllBlocksCleared}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i, batch := range got {
		if !batch.HasDPRank || batch.DPRank != 3 {
			t.Fatalf("batch %d: dp rank %v/%d, want 3", i, batch.HasDPRank, batch.DPRank)
		}
		if batch.TS < float64(epoch0.Unix()) || batch.TS > float64(epoch0.Unix()+60) {
			t.Fatalf("batch %d: ts %v is not the injected clock's time", i, batch.TS)
		}
		if len(batch.Events) != len(want[i]) {
			t.Fatalf("batch %d: %d events, want %d", i, len(batch.Events), len(want[i]))
		}
		for j, e := range batch.Events {
			x := want[i][j]
			if e.Kind != x.kind || !slices.Equal(e.BlockHashes, x.hashes) || e.HasParent != x.hasParent ||
				e.Parent != x.parent || !slices.Equal(e.TokenIDs, x.tokens) {
				t.Fatalf("batch %d event %d: got %+v, want %+v", i, j, e, x)
			}
			if e.Kind == kvevents.KindBlockStored && (e.BlockSize != bs || e.Medium != kvwire.TierDevice || !e.Indexable()) {
				t.Fatalf("batch %d event %d: block size %d medium %v indexable %v", i, j, e.BlockSize, e.Medium, e.Indexable())
			}
		}
	}
	st := w.Stats()[0]
	if st.CachedBlocks != 0 || st.PinnedBlocks != 0 || st.Requests != 4 || st.Publisher.NextSeq != 4 {
		t.Fatalf("stats after reset: %+v", st)
	}
}

// TestEngineHashesDifferFromKVSelect: the engine's hashes must not coincide with kvselect's
// local block hashes, or a router could match engine hashes by accident instead of indexing
// token content.
func TestEngineHashesDifferFromKVSelect(t *testing.T) {
	p := tokens(1, 64)
	eng := EngineHashes(nil, p, 16, DefaultHashSeed)
	if len(eng) != 4 {
		t.Fatalf("%d hashes for 4 blocks", len(eng))
	}
	local := kvhash.BlockHashes(nil, p, 16, kvhash.BlockSeed("", ""), false, nil)
	for i := range eng {
		if eng[i] == local[i] {
			t.Fatalf("block %d: engine hash equals kvselect's local hash", i)
		}
	}
	// Chained: the same block content under a different parent hashes differently.
	q := append(tokens(2, 16), p[16:32]...)
	if EngineHashes(nil, q, 16, DefaultHashSeed)[1] == eng[1] {
		t.Fatal("engine hash is not chained to the parent")
	}
	if EngineHashes(nil, p, 16, 1)[0] == eng[0] {
		t.Fatal("engine hash ignores the seed")
	}
	if len(EngineHashes(nil, p[:15], 16, 1)) != 0 {
		t.Fatal("a partial block got a hash")
	}
}

// TestResetRefusedWhileBusy: like vLLM's reset_prefix_cache, Reset fails while a request
// holds blocks, and publishes nothing.
func TestResetRefusedWhileBusy(t *testing.T) {
	clk := NewManualClock(epoch0)
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 8, Clock: clk})
	done := make(chan error, 1)
	go func() {
		_, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(1, 8), MaxTokens: intp(1)})
		done <- err
	}()
	poll.True(t, 5e9, "request in prefill", func() bool { return clk.Waiters() == 1 })
	clk.Advance(sim100ms) // prefill done; now decoding with 2 pinned blocks
	poll.True(t, 5e9, "request in decode", func() bool { return clk.Waiters() == 1 && w.Stats()[0].PinnedBlocks == 2 })
	if err := w.Reset(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Reset while busy: %v, want ErrBusy", err)
	}
	clk.Advance(sim100ms)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs, _ := w.Published(0, 0)
	if len(recs) != 1 {
		t.Fatalf("%d batches, want only the store", len(recs))
	}
	if err := w.Reset(); err != nil {
		t.Fatalf("Reset when idle: %v", err)
	}
}

// TestDPRanksHaveOwnCachesAndEndpoints: each rank caches separately, publishes on its own
// endpoint with its global rank, and an unknown rank is a bad request.
func TestDPRanksHaveOwnCachesAndEndpoints(t *testing.T) {
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 8, DPSize: 2, DPStartRank: 4, Clock: NewInstantClock(epoch0)})
	eps := w.Endpoints()
	if len(eps) != 2 || eps[0] == eps[1] {
		t.Fatalf("endpoints %v", eps)
	}
	p := tokens(7, 8)
	if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, DPRank: intp(5)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rank, want int }{{4, 0}, {5, 2}} {
		if n, err := w.CachedBlocks(c.rank, p); err != nil || n != c.want {
			t.Fatalf("rank %d: %d cached (%v), want %d", c.rank, n, err, c.want)
		}
	}
	recs, _ := w.Published(5, 0)
	if b := decodeAll(t, recs); len(b) != 1 || b[0].DPRank != 5 {
		t.Fatalf("rank 5 batches: %+v", b)
	}
	for _, bad := range []int{3, 6, -1} {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, DPRank: intp(bad)}); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("dp_rank %d: %v, want ErrBadRequest", bad, err)
		}
	}
	// Without a rank the least busy (lowest on ties) serves.
	if r, err := w.Serve(context.Background(), Request{PromptTokenIDs: p}); err != nil || r.DPRank != 4 {
		t.Fatalf("unpinned request served on %d (%v), want 4", r.DPRank, err)
	}
}

// TestPresetPublishesStepBatches: with a realistic preset each engine step's KV events leave as
// one batch, published when the step ends (vLLM's update_from_output): the blocks evicted to
// make room for the step and the blocks its prefill chunks complete (full blocks only, with
// their tokens), in that order; AllBlocksCleared on Reset.
func TestPresetPublishesStepBatches(t *testing.T) {
	const bs = 4
	w := newWorker(t, Config{BlockSize: bs, NumGPUBlocks: 8, Model: "h100-8b", Clock: NewInstantClock(epoch0)})
	seed := w.Config().HashSeed
	a := tokens(100, 3*bs+2) // 3 full blocks + a partial one
	b := tokens(9000, 6*bs)  // its prompt takes 6 blocks: 5 free ones come first in the free queue (a's partial block among them), then a's deepest block is evicted
	for _, p := range [][]uint32{a, b} {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, MaxTokens: intp(1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Reset(); err != nil {
		t.Fatal(err)
	}
	recs, err := w.Published(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAll(t, recs)
	ha, hb := EngineHashes(nil, a, bs, seed), EngineHashes(nil, b, bs, seed)
	if len(got) != 3 {
		t.Fatalf("%d batches, want 3 (a stored; b's evictions and b stored; cleared): %+v", len(got), got)
	}
	if e := got[0].Events; len(e) != 1 || e[0].Kind != kvevents.KindBlockStored || !slices.Equal(e[0].BlockHashes, ha) || !slices.Equal(e[0].TokenIDs, a[:3*bs]) {
		t.Fatalf("batch 0: %+v", e)
	}
	if e := got[1].Events; len(e) != 2 || e[0].Kind != kvevents.KindBlockRemoved || !slices.Equal(e[0].BlockHashes, ha[2:3]) ||
		e[1].Kind != kvevents.KindBlockStored || !slices.Equal(e[1].BlockHashes, hb) || !slices.Equal(e[1].TokenIDs, b) {
		t.Fatalf("batch 1: %+v, want a's deepest block evicted, then b's blocks stored", e)
	}
	if e := got[2].Events; len(e) != 1 || e[0].Kind != kvevents.KindAllBlocksCleared {
		t.Fatalf("batch 3: %+v", e)
	}
}
