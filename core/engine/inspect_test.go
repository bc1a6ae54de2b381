package engine

// Inspection and index tests: Loads, PotentialLoads, OverlapScores, ApplyKVEvents (stored,
// removed, cleared, block-size mismatch, duplicate hashes), ClearOwnerBlocks, the /dump format
// of spec §11.2, KV hints (§9) and approximate mode (use_kv_events=false).

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// deviceOverlap returns each rank's device overlap (blocks) for a token prompt.
func deviceOverlap(t testing.TB, e *Engine, prompt []uint32) map[kvwire.Owner]uint64 {
	t.Helper()
	res, err := e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(prompt)})
	noErr(t, err)
	out := map[kvwire.Owner]uint64{}
	for _, w := range res.Workers {
		out[kvwire.Owner{Worker: w.WorkerID, Rank: w.DPRank}] = w.DeviceBlocks
	}
	return out
}

// TestApplyKVEvents: events for unknown owners, mismatched block sizes and chains with repeated
// hashes are dropped whole and change nothing; a short store indexes its complete blocks.
// Stored chains, removals, clears and tiers are testdata/kv_events.txt.
func TestApplyKVEvents(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(0, 2)))
	_, _ = e.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(7))}) // incomplete
	o, o1 := kvwire.Owner{Worker: 1}, kvwire.Owner{Worker: 1, Rank: 1}
	prompt := toks(0, 32) // 8 blocks
	first := storedEvent(o, TierOf("device"), nil, prompt, 4)
	if st := e.ApplyKVEvents(o, []KVEvent{first}); st.StoredBlocks != 8 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}

	// Duplicate detection has two code paths (a quadratic scan up to 8 hashes, a set beyond), so
	// both lengths are covered; spec §10.3 drops such events whole.
	mismatch := storedEvent(o1, TierOf("device"), nil, prompt, 4)
	mismatch.BlockSize = 16
	dup := storedEvent(o1, TierOf("device"), nil, prompt[:12], 4)
	dup.BlockHashes[2] = dup.BlockHashes[0]
	parentDup := storedEvent(o1, TierOf("device"), prompt[:4], prompt[4:8], 4)
	parentDup.BlockHashes[0] = parentDup.Parent
	orphan := storedEvent(o1, TierOf("device"), prompt[:4], prompt[4:8], 4) // parent never stored
	long := storedEvent(o1, TierOf("device"), nil, toks(900, 40), 4)        // 10 blocks: the map path
	long.BlockHashes[9] = long.BlockHashes[3]
	drops := []struct {
		name  string
		owner kvwire.Owner
		ev    KVEvent
		check func(KVApplyStats) bool
	}{
		{"block size mismatch", o1, mismatch, func(s KVApplyStats) bool { return s.SizeMismatches == 8 && s.StoredBlocks == 0 }},
		{"duplicate hash in chain", o1, dup, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"hash repeats the parent", o1, parentDup, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"duplicate in a long chain", o1, long, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"unknown parent", o1, orphan, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"unknown worker", kvwire.Owner{Worker: 9}, first, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"incomplete worker", kvwire.Owner{Worker: 7}, first, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"rank outside range", kvwire.Owner{Worker: 1, Rank: 2}, first, func(s KVApplyStats) bool { return s.Dropped == 1 }},
		{"unknown kind", o1, KVEvent{Kind: 99}, func(s KVApplyStats) bool { return s.Dropped == 1 }},
	}
	for _, tc := range drops {
		st := e.ApplyKVEvents(tc.owner, []KVEvent{tc.ev})
		if !tc.check(st) {
			t.Errorf("%s: stats %+v", tc.name, st)
		}
		if ov := deviceOverlap(t, e, prompt); ov[o1] != 0 || ov[o] != 8 {
			t.Errorf("%s changed overlap: %v", tc.name, ov)
		}
	}

	// A store with too few tokens indexes the complete blocks and reports the truncation.
	short := storedEvent(o1, TierOf("device"), nil, prompt[:12], 4)
	short.TokenIDs = short.TokenIDs[:9]
	if st := e.ApplyKVEvents(o1, []KVEvent{short}); st.StoredBlocks != 2 || st.Truncated != 1 {
		t.Fatalf("truncated store %+v", st)
	}
	if e.ClearOwnerBlocks(kvwire.Owner{Worker: 7}) {
		t.Fatalf("ClearOwnerBlocks knows an incomplete worker")
	}
	var total KVApplyStats
	total.Add(KVApplyStats{StoredBlocks: 1, Dropped: 2})
	total.Add(KVApplyStats{StoredBlocks: 3, Truncated: 1})
	if total != (KVApplyStats{StoredBlocks: 4, Dropped: 2, Truncated: 1}) {
		t.Fatalf("Add %+v", total)
	}
}

// TestApplyKVEventsLoraAndSalt: a stored block is indexed under the hash of its own tokens with
// the event's LoRA and cache salt, so only prompts with the same namespace match it.
func TestApplyKVEventsLoraAndSalt(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	o := kvwire.Owner{Worker: 1}
	ev := storedEvent(o, TierOf("device"), nil, toks(0, 16), 4)
	ev.LoraName = "adapter-a"
	e.ApplyKVEvents(o, []KVEvent{ev})
	for _, tc := range []struct {
		lora *string
		want uint64
	}{{nil, 0}, {ptr("adapter-a"), 4}, {ptr("adapter-b"), 0}} {
		res, err := e.OverlapScores(&PromptQuery{Prompt: Prompt{TokenIDs: toks(0, 16), LoraName: tc.lora}})
		noErr(t, err)
		if res.Workers[0].DeviceBlocks != tc.want {
			t.Fatalf("lora %v: overlap %d, want %d", tc.lora, res.Workers[0].DeviceBlocks, tc.want)
		}
	}
}

// TestOverlapScoresAndPotentialLoads: rows for every schedulable rank (zero overlap included),
// sorted by (worker, rank), cumulative tier columns and router credit; potential loads project
// the prompt onto every rank.
func TestOverlapScoresAndPotentialLoads(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(2, dp(0, 2)))
	mustUpsert(t, e, spec(1))
	prompt := toks(0, 24)
	r20 := kvwire.Owner{Worker: 2, Rank: 0}
	storeTier(t, e, r20, TierOf("device"), nil, prompt[:8])
	storeTier(t, e, r20, TierOf("host_pinned"), prompt[:8], prompt[8:12])
	storeTier(t, e, r20, TierOf("external"), prompt[:12], prompt[12:20])

	res, err := e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(prompt)})
	noErr(t, err)
	if res.BlockSize != 4 || res.NumBlocks != 6 || res.SharedCache.Enabled || res.SharedCache.Ranges == nil {
		t.Fatalf("header %+v", res)
	}
	var order []string
	for _, w := range res.Workers {
		order = append(order, fmt.Sprintf("%d/%d", w.WorkerID, w.DPRank))
	}
	if !slices.Equal(order, []string{"1/0", "2/0", "2/1"}) {
		t.Fatalf("rows %v", order)
	}
	// Rank 2/0: 2 device blocks, then 1 host_pinned and 2 external blocks; the cumulative columns
	// add up (host_pinned = 3, disk = 5) and external counts as disk for the extension column.
	row := res.Workers[1]
	want := OverlapRow{WorkerID: 2, DPRank: 0, DeviceBlocks: 2, HostPinnedBlocks: 3, DiskBlocks: 5,
		HostPinnedExtensionBlocks: 1, DiskExtensionBlocks: 2, RouterCreditBlocks: 2 + 0.75*1 + 0.25*2}
	if row != want {
		t.Fatalf("row\n got %+v\nwant %+v", row, want)
	}
	raw, _ := json.Marshal(res)
	for _, frag := range []string{`"shared_beyond_device_blocks":null`, `"shared_cache":{"enabled":false,"total_hit_blocks":0,"ranges":[],"error":null}`} {
		if !json.Valid(raw) || !strings.Contains(string(raw), frag) {
			t.Fatalf("overlap_scores JSON lacks %s: %s", frag, raw)
		}
	}
	over := &PromptQuery{Prompt: tokenPrompt(prompt), RouterConfigOverride: &ConfigOverride{OverlapScoreCredit: ptr(2.0)}}
	res, _ = e.OverlapScores(over)
	if res.Workers[1].RouterCreditBlocks != 4+0.75+0.5 {
		t.Fatalf("credit override ignored: %v", res.Workers[1].RouterCreditBlocks)
	}
	_, err = e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(prompt), RouterConfigOverride: &ConfigOverride{PrefillLoadScale: ptr(-1.0)}})
	wantErr(t, err, ErrUnprocessable)

	// Potential loads: cached = round((2 + 0.75 + 0.25·2)·4) = 13 on rank 2/0.
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("b"), WorkerID: ptr(uint64(1)), Prompt: tokenPrompt(prompt[:8])}, t0)
	noErr(t, err)
	pl, err := e.PotentialLoads(&PromptQuery{Prompt: tokenPrompt(prompt)})
	noErr(t, err)
	wantPL := []PotentialLoad{
		{WorkerID: 1, DPRank: 0, PotentialPrefillTokens: 8 + 24, PotentialDecodeBlocks: 2 + 4, ActiveRequests: 1},
		{WorkerID: 2, DPRank: 0, PotentialPrefillTokens: 24 - 13, PotentialDecodeBlocks: 6},
		{WorkerID: 2, DPRank: 1, PotentialPrefillTokens: 24, PotentialDecodeBlocks: 6},
	}
	if !slices.Equal(pl, wantPL) {
		t.Fatalf("potential loads\n got %+v\nwant %+v", pl, wantPL)
	}
	pl, _ = e.PotentialLoads(&PromptQuery{Prompt: tokenPrompt(prompt), RouterConfigOverride: &ConfigOverride{TrackPrefillTokens: ptr(false)}})
	if pl[1].PotentialPrefillTokens != 0 || pl[0].PotentialPrefillTokens != 8 {
		t.Fatalf("untracked potential prefill %+v", pl)
	}
	_, err = e.PotentialLoads(&PromptQuery{Prompt: tokenPrompt(prompt), RouterConfigOverride: &ConfigOverride{RouterTemperature: ptr(-1.0)}})
	wantErr(t, err, ErrUnprocessable)
}

// TestLoadsListing: /loads lists every partition sorted by (model, group) with filters, and
// rows for every rank even without bookings.
func TestLoadsListing(t *testing.T) {
	e := newEngine(t, nil)
	if l := e.Loads("", ""); l == nil || len(l) != 0 {
		t.Fatalf("empty engine loads %v, want []", l)
	}
	mustUpsert(t, e, spec(1, inModel("b", "x")))
	mustUpsert(t, e, spec(2, inModel("a", "y"), dp(0, 2)))
	mustUpsert(t, e, spec(3, inModel("a", "x")))
	var keys []string
	for _, pl := range e.Loads("", "") {
		keys = append(keys, pl.ModelName+"/"+pl.RoutingGroup+fmt.Sprint(len(pl.Loads)))
	}
	if !slices.Equal(keys, []string{"a/x1", "a/y2", "b/x1"}) {
		t.Fatalf("loads %v", keys)
	}
	if l := e.Loads("a", ""); len(l) != 2 {
		t.Fatalf("model filter %+v", l)
	}
	if l := e.Loads("", "x"); len(l) != 2 || l[1].ModelName != "b" {
		t.Fatalf("group filter %+v", l)
	}
	if l := e.Loads("a", "y"); len(l) != 1 || l[0].Loads[1].DPRank != 1 {
		t.Fatalf("both filters %+v", l)
	}
}

// dumpJSON renders the whole /dump document the way the HTTP layer assembles it.
func dumpJSON(t testing.TB, e *Engine) []byte {
	t.Helper()
	out := []byte{'{'}
	for i, k := range e.DumpPartitionKeys() {
		if i > 0 {
			out = append(out, ',')
		}
		kj, _ := json.Marshal(k.DumpKey())
		out = append(out, kj...)
		out = append(out, `:{"block_size":`...)
		var events []byte
		events, bs, _, ok := e.DumpPartition(k, nil)
		if !ok {
			t.Fatalf("listed partition %v has no dump", k)
		}
		out = append(out, fmt.Sprint(bs)...)
		out = append(out, `,"events":`...)
		out = append(out, events...)
		out = append(out, '}')
	}
	return append(out, '}')
}

// routerEvent mirrors spec §11.2's RouterEvent with exactly the fields kvselect emits.
type routerEvent struct {
	WorkerID    uint64 `json:"worker_id"`
	StorageTier string `json:"storage_tier"`
	Event       struct {
		EventID uint64 `json:"event_id"`
		Data    struct {
			Stored *struct {
				ParentHash    *uint64 `json:"parent_hash"`
				StartPosition *uint32 `json:"start_position"`
				Blocks        []struct {
					BlockHash   uint64          `json:"block_hash"`
					TokensHash  uint64          `json:"tokens_hash"`
					MMExtraInfo json.RawMessage `json:"mm_extra_info"`
				} `json:"blocks"`
			} `json:"stored"`
		} `json:"data"`
		DPRank uint32 `json:"dp_rank"`
	} `json:"event"`
}

// TestDump: the dump is valid JSON in spec §11.2's shape, event ids count from 0, and replaying
// it into a fresh engine reproduces every rank's overlap.
func TestDump(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(0, 2)))
	mustUpsert(t, e, spec(2, inModel("m", "g")))
	prompt := toks(0, 32)
	store(t, e, kvwire.Owner{Worker: 1}, prompt)
	store(t, e, kvwire.Owner{Worker: 1, Rank: 1}, prompt[:12])
	storeTier(t, e, kvwire.Owner{Worker: 1, Rank: 1}, TierOf("disk"), prompt[:12], prompt[12:20])
	store(t, e, kvwire.Owner{Worker: 1, Rank: 1}, cat(prompt[:8], toks(700, 8)))

	raw := dumpJSON(t, e)
	if !json.Valid(raw) {
		t.Fatalf("dump is not JSON: %s", raw)
	}
	var doc map[string]struct {
		BlockSize uint32            `json:"block_size"`
		Events    []json.RawMessage `json:"events"`
	}
	noErr(t, json.Unmarshal(raw, &doc))
	if len(doc) != 2 || doc["m:g"].BlockSize != 4 || len(doc["m:g"].Events) != 0 {
		t.Fatalf("dump partitions %s", raw)
	}
	part := doc["default:default"]
	if len(part.Events) == 0 {
		t.Fatalf("no events")
	}
	// Replaying the events into an empty index must rebuild the same overlaps: the dump is the
	// recovery format peers bootstrap from (spec §11.3).
	fresh := newEngine(t, nil)
	mustUpsert(t, fresh, spec(1, dp(0, 2)))
	tiers := map[string]bool{}
	for i, rawEv := range part.Events {
		var ev routerEvent
		noErr(t, json.Unmarshal(rawEv, &ev))
		st := ev.Event.Data.Stored
		if ev.Event.EventID != uint64(i) || st == nil || st.StartPosition != nil || len(st.Blocks) == 0 {
			t.Fatalf("event %d: %s", i, rawEv)
		}
		tiers[ev.StorageTier] = true
		// Replay straight into the index: tokens are not in the dump, only their hashes.
		p := fresh.parts[defKey]
		blocks := make([]radix.StoredBlock, len(st.Blocks))
		for j, b := range st.Blocks {
			if string(b.MMExtraInfo) != "null" {
				t.Fatalf("mm_extra_info %s", b.MMExtraInfo)
			}
			blocks[j] = radix.StoredBlock{External: b.BlockHash, Local: b.TokensHash}
		}
		tier := TierOf(ev.StorageTier)
		parent, has := uint64(0), st.ParentHash != nil
		if has {
			parent = *st.ParentHash
		}
		noErr(t, p.index.Store(kvwire.Owner{Worker: ev.WorkerID, Rank: ev.Event.DPRank}, tier, parent, has, blocks))
	}
	if !tiers["device"] || !tiers["disk"] {
		t.Fatalf("tiers in dump %v", tiers)
	}
	for _, pr := range [][]uint32{prompt, cat(prompt[:8], toks(700, 8)), prompt[:20]} {
		a, _ := e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(pr)})
		b, _ := fresh.OverlapScores(&PromptQuery{Prompt: tokenPrompt(pr)})
		if !slices.Equal(a.Workers, b.Workers) {
			t.Fatalf("replayed dump differs:\n%+v\n%+v", a.Workers, b.Workers)
		}
	}
	if _, _, _, ok := e.DumpPartition(PartitionKey{Model: "zz"}, nil); ok {
		t.Fatalf("unknown partition dumped")
	}
}

// TestKVHint (spec §9): a booking gets a kv.fetch hint naming the rank with the longest strictly
// longer device prefix of the same worker type that advertises a source endpoint; ties go to
// the lowest (worker, rank); state_agent_v2 ranks and other worker types are never sources.
func TestKVHint(t *testing.T) {
	hinted := func(kind string, srcs map[string]string, edits ...func(*WorkerSpec)) func(*WorkerSpec) {
		return func(s *WorkerSpec) {
			s.RouterHintWorkerType = ptr(kind)
			s.RouterHintSourceControlEndpoints = srcs
			for _, ed := range edits {
				ed(s)
			}
		}
	}
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, hinted("decode", nil)))                                      // target: nothing cached
	mustUpsert(t, e, spec(2, hinted("decode", map[string]string{"0": "tcp://w2:5600"})))  // 4 blocks
	mustUpsert(t, e, spec(3, hinted("decode", map[string]string{"0": "tcp://w3:5600"})))  // 4 blocks (tie, higher id)
	mustUpsert(t, e, spec(4, hinted("prefill", map[string]string{"0": "tcp://w4:5600"}))) // 6 blocks, other type
	mustUpsert(t, e, spec(5, hinted("decode", map[string]string{"0": "tcp://w5:5600"}, func(s *WorkerSpec) { s.KVEventSourceMode = ptr("state_agent_v2") })))
	mustUpsert(t, e, spec(6, hinted("decode", map[string]string{"1": "tcp://w6:5601"}))) // endpoint for another rank only
	prompt := toks(0, 24)
	store(t, e, kvwire.Owner{Worker: 2}, prompt[:16])
	store(t, e, kvwire.Owner{Worker: 3}, prompt[:16])
	store(t, e, kvwire.Owner{Worker: 4}, prompt[:24])
	store(t, e, kvwire.Owner{Worker: 5}, prompt[:24])
	store(t, e, kvwire.Owner{Worker: 6}, prompt[:24])

	// Target worker 1 holds nothing. Sources: 2 and 3 tie at 4 blocks (lowest id wins); 4 is
	// longer but another worker type; 5 is a state agent; 6 advertises no endpoint for rank 0.
	r := selReq("h1", prompt)
	r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
	resp, err := e.SelectAndReserve(r, t0)
	noErr(t, err)
	h := resp.KVHint
	if h == nil || h.ProtocolVersion != "0.1" || h.MessageID != "h1" || len(h.Actions) != 1 {
		t.Fatalf("hint %+v", h)
	}
	a := h.Actions[0]
	seqs := kvhashSeq(prompt)
	wantHashes := []int64{int64(extHash(kvwire.Owner{Worker: 2}, seqs[0])), int64(extHash(kvwire.Owner{Worker: 2}, seqs[1])), int64(extHash(kvwire.Owner{Worker: 2}, seqs[2])), int64(extHash(kvwire.Owner{Worker: 2}, seqs[3]))}
	if a.ActionID != "a1" || a.ActionType != "kv.fetch" || a.ActionVersion != "1.0" || a.Payload.SourceControlEndpoint != "tcp://w2:5600" || !slices.Equal(a.Payload.BlockHashes, wantHashes) {
		t.Fatalf("action %+v, want source w2 with %v", a, wantHashes)
	}

	// Never on query-only selects.
	q := selReq("", prompt)
	q.PinnedWorker = r.PinnedWorker
	if resp, _ := e.Select(q, t0); resp.KVHint != nil {
		t.Fatalf("query select carries a hint")
	}
	// No hint when the target already holds the longest prefix, or has no worker type.
	mustUpsert(t, e, spec(7))
	for _, target := range []uint64{5, 7} {
		r := selReq(fmt.Sprint("h", target), prompt)
		r.PinnedWorker = &PinnedWorker{WorkerID: ptr(target), DPRank: ptr(uint32(0))}
		resp, err := e.SelectAndReserve(r, t0)
		noErr(t, err)
		if resp.KVHint != nil {
			t.Fatalf("target %d got hint %+v", target, resp.KVHint)
		}
	}
	// Approximate mode never hints.
	a2 := newEngine(t, approxConfig())
	mustUpsert(t, a2, spec(1, hinted("decode", nil)))
	mustUpsert(t, a2, spec(2, hinted("decode", map[string]string{"0": "tcp://w2:5600"})))
	_, _ = a2.SelectAndReserve(&SelectRequest{SelectionID: ptr("x"), Prompt: tokenPrompt(prompt), PinnedWorker: &PinnedWorker{WorkerID: ptr(uint64(2)), DPRank: ptr(uint32(0))}}, t0)
	resp, err = a2.SelectAndReserve(&SelectRequest{SelectionID: ptr("y"), Prompt: tokenPrompt(prompt), PinnedWorker: r.PinnedWorker}, t0)
	noErr(t, err)
	if resp.KVHint != nil {
		t.Fatalf("approximate mode hinted")
	}
}

// TestApproximateMode: with use_kv_events=false bookings feed the index (as their own prefix
// chains), hash-only bookings are not recorded, and entries expire after router_ttl_secs via
// Sweep; a later booking of the same prefix extends its life.
func TestApproximateMode(t *testing.T) {
	cfg := approxConfig()
	cfg.TTL = 10 * time.Second
	e := newEngine(t, cfg)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	prompt := toks(0, 16)
	pin := func(id string, w uint64, pr []uint32, at time.Time) {
		t.Helper()
		_, err := e.SelectAndReserve(&SelectRequest{SelectionID: ptr(id), Prompt: tokenPrompt(pr),
			PinnedWorker: &PinnedWorker{WorkerID: ptr(w), DPRank: ptr(uint32(0))}}, at)
		noErr(t, err)
	}
	pin("a", 1, prompt, t0)
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 4 || ov[kvwire.Owner{Worker: 2}] != 0 {
		t.Fatalf("booking not recorded: %v", ov)
	}
	// The same blocks under a different prefix stay distinct.
	if ov := deviceOverlap(t, e, cat(toks(100, 4), prompt[4:])); ov[kvwire.Owner{Worker: 1}] != 0 {
		t.Fatalf("position-independent match %v", ov)
	}
	// Free does not forget the cache; a hash-only booking records nothing.
	noErr(t, e.Free("a"))
	_, err := e.Reserve(&ReservationRequest{SelectionID: ptr("h"), WorkerID: ptr(uint64(2)), Prompt: Prompt{SequenceHashes: []int64{1, 2}, ISLTokens: ptr(uint64(8))}}, t0)
	noErr(t, err)
	// A replayed select with tokens does record (on the selected worker).
	_, err = e.Select(&SelectRequest{SelectionID: ptr("r"), Prompt: tokenPrompt(prompt[:8]), AllowedWorkerIDs: []uint64{2}}, t0)
	noErr(t, err)
	_, err = e.Reserve(replay("r"), t0.Add(5*time.Second))
	noErr(t, err)
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 4 || ov[kvwire.Owner{Worker: 2}] != 2 {
		t.Fatalf("after replay %v", ov)
	}
	// Worker 1's blocks were recorded at t0 (deadline t0+10s), worker 2's at t0+5s (t0+15s).
	e.Sweep(t0.Add(10*time.Second - 1))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 4 {
		t.Fatalf("expired before the TTL: %v", ov)
	}
	e.Sweep(t0.Add(10 * time.Second))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 0 || ov[kvwire.Owner{Worker: 2}] != 2 {
		t.Fatalf("after worker 1's TTL %v", ov)
	}
	e.Sweep(t0.Add(15 * time.Second))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 2}] != 0 {
		t.Fatalf("after worker 2's TTL %v", ov)
	}
	// KV events are not applied in approximate mode's catalog sense: there are no sources.
	if e.EventSources(1) != nil {
		t.Fatalf("event sources in approximate mode")
	}
	// Deleting a worker drops its approximate entries.
	pin("b", 1, prompt, t0.Add(20*time.Second))
	_, _ = e.DeleteWorker(1)
	mustUpsert(t, e, spec(1))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 0 {
		t.Fatalf("re-registered worker kept approximate entries %v", ov)
	}
	e.Sweep(t0.Add(time.Hour)) // must not trip over the dropped owner's queued expiries
}

// TestApplyStoredTruncation: a stored event indexes exactly the blocks whose token window is
// complete (blockSize tokens, one more for Eagle layouts) and counts one truncation when its
// tokens end before its hashes do. The reference is the window arithmetic itself.
func TestApplyStoredTruncation(t *testing.T) {
	const bs, hashes = 4, 3
	for _, eagle := range []bool{false, true} {
		window := bs
		if eagle {
			window++
		}
		for n := 0; n <= hashes*bs+2; n++ {
			want := 0
			for want < hashes && want*bs+window <= n {
				want++
			}
			e := newEngine(t, nil)
			mustUpsert(t, e, spec(1, dp(0, 1)))
			ev := KVEvent{Kind: KVStored, Tier: TierOf("device"), BlockSize: bs, Eagle: eagle,
				TokenIDs: toks(0, n), BlockHashes: []uint64{101, 102, 103}}
			st := e.ApplyKVEvents(kvwire.Owner{Worker: 1}, []KVEvent{ev})
			truncated := 0
			if want < hashes {
				truncated = 1
			}
			if st.StoredBlocks != want || st.Truncated != truncated {
				t.Errorf("eagle=%v, %d tokens: stored %d truncated %d, want %d and %d", eagle, n, st.StoredBlocks, st.Truncated, want, truncated)
			}
		}
	}
}
