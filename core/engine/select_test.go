package engine

// Selection tests: Select and SelectAndReserve error paths (409, 503), hard and soft targets
// (pinned_worker, affinity_target), eligibility filters (allowed_worker_ids, required and
// preferred taints), advisory worker_load, decode_busy, queue admission, and the response shape
// (overlap summary including zero-overlap DP ranks).

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// cachedPair registers worker 1 (holding the first 8 blocks of prompt) and worker 2 (holding
// nothing), so that worker 1 is strictly cheapest for prompt.
func cachedPair(t *testing.T, cfg *Config) (*Engine, []uint32) {
	t.Helper()
	e := newEngine(t, cfg)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.Taints = []string{"gpu-a", "zone-1"} }))
	mustUpsert(t, e, spec(2, func(s *WorkerSpec) { s.Taints = []string{"gpu-b"} }))
	prompt := toks(0, 40)
	store(t, e, kvwire.Owner{Worker: 1}, prompt[:32])
	return e, prompt
}

// TestSelectNotReady: both 503 messages, from every prompt-taking operation.
func TestSelectNotReady(t *testing.T) {
	e := newEngine(t, nil)
	// check runs every operation that needs a ready partition and expects the same 503.
	check := func(want string) {
		t.Helper()
		_, err := e.Select(selReq("", toks(0, 8)), t0)
		wantErr(t, err, ErrNotReady, want)
		_, err = e.SelectAndReserve(selReq("", toks(0, 8)), t0)
		wantErr(t, err, ErrNotReady, want)
		_, err = e.PotentialLoads(&PromptQuery{Prompt: tokenPrompt(toks(0, 8))})
		wantErr(t, err, ErrNotReady, want)
		_, err = e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(toks(0, 8))})
		wantErr(t, err, ErrNotReady, want)
		_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("x"), WorkerID: ptr(uint64(1)), Prompt: tokenPrompt(toks(0, 8))}, t0)
		wantErr(t, err, ErrNotReady, want)
	}
	// No worker at all, then only an incomplete one: the catalog-wide message.
	check("no schedulable workers are available")
	_, _ = e.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(1))}) // incomplete
	check("no schedulable workers are available")
	// A schedulable worker elsewhere: the message names the partition.
	mustUpsert(t, e, spec(2, inModel("other", "g")))
	check("no schedulable workers for model=default routing_group=default")
	if len(e.TakeEffects(nil)) != 0 {
		t.Fatalf("failed selections emitted effects")
	}
}

// TestSelectAndReserveConflict: a booked id conflicts (409) in any partition and in either
// reservation form until it is freed; generated ids are distinct v4 UUIDs.
func TestSelectAndReserveConflict(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2, inModel("m2", DefaultName)))
	_, err := e.SelectAndReserve(selReq("a", toks(0, 8)), t0)
	noErr(t, err)
	_ = e.TakeEffects(nil)

	_, err = e.SelectAndReserve(selReq("a", toks(0, 8)), t0)
	wantErr(t, err, ErrConflict, "selection a is already reserved or being reserved")
	other := selReq("a", toks(0, 8))
	other.ModelName = ptr("m2")
	_, err = e.SelectAndReserve(other, t0)
	wantErr(t, err, ErrConflict)
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("a"), WorkerID: ptr(uint64(1)), Prompt: tokenPrompt(toks(0, 8))}, t0)
	wantErr(t, err, ErrConflict)
	if ev := e.TakeEffects(nil); len(ev) != 0 {
		t.Fatalf("conflicts emitted %d effects", len(ev))
	}
	if l := loadOf(e, defKey, kvwire.Owner{Worker: 1}); l.ActiveRequests != 1 {
		t.Fatalf("conflicts changed load: %+v", l)
	}
	noErr(t, e.Free("a"))
	_, err = e.SelectAndReserve(other, t0)
	noErr(t, err)

	// Without selection_id the booking id is a v4 UUID drawn from the engine's seeded source.
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		resp, err := e.SelectAndReserve(selReq("", toks(0, 8)), t0)
		noErr(t, err)
		id := *resp.SelectionID
		if !uuid.MatchString(id) || seen[id] {
			t.Fatalf("generated id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// TestSelectTargets covers pinned_worker and affinity_target.
func TestSelectTargets(t *testing.T) {
	e, prompt := cachedPair(t, nil)
	mustUpsert(t, e, spec(3, dp(0, 2)))
	pick := func(r *SelectRequest) (kvwire.Owner, error) {
		r.Prompt = tokenPrompt(prompt)
		resp, err := e.Select(r, t0)
		if err != nil {
			return kvwire.Owner{}, err
		}
		return kvwire.Owner{Worker: resp.WorkerID, Rank: resp.DPRank}, nil
	}
	u := func(v uint64) *uint64 { return &v }
	r32 := func(v uint32) *uint32 { return &v }
	// Precedence (spec §5.4): pinned_worker > affinity_target > cost. Pins are validated against
	// eligibility (allowed ids, required taints) and fail hard; an ineligible or unknown affinity
	// target is silently ignored. Filters alone can leave nothing, which is a 503 no_endpoints.
	tests := []struct {
		name    string
		req     SelectRequest
		want    kvwire.Owner
		wantErr string
	}{
		{"cheapest without targets", SelectRequest{}, kvwire.Owner{Worker: 1}, ""},
		{"pinned beats cost", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(3), DPRank: r32(1)}}, kvwire.Owner{Worker: 3, Rank: 1}, ""},
		{"pinned beats affinity", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(2), DPRank: r32(0)}, AffinityTarget: &AffinityTarget{WorkerID: u(3)}}, kvwire.Owner{Worker: 2}, ""},
		{"pinned unknown worker", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(9), DPRank: r32(0)}}, kvwire.Owner{}, "pinned worker 9 (dp_rank 0) is not schedulable for model=default routing_group=default"},
		{"pinned rank outside range", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(3), DPRank: r32(2)}}, kvwire.Owner{}, "pinned worker 3 (dp_rank 2) is not schedulable"},
		{"pinned but not allowed", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(2), DPRank: r32(0)}, AllowedWorkerIDs: []uint64{1}}, kvwire.Owner{}, "pinned worker 2 (dp_rank 0) is not allowed for this request"},
		{"pinned but missing required taint", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: u(2), DPRank: r32(0)}, RoutingConstraints: &RoutingConstraints{RequiredTaints: []string{"gpu-a"}}}, kvwire.Owner{}, "is not allowed"},
		{"affinity beats cost", SelectRequest{AffinityTarget: &AffinityTarget{WorkerID: u(2)}}, kvwire.Owner{Worker: 2}, ""},
		{"affinity with rank", SelectRequest{AffinityTarget: &AffinityTarget{WorkerID: u(3), DPRank: r32(1)}}, kvwire.Owner{Worker: 3, Rank: 1}, ""},
		{"affinity to an ineligible worker is ignored", SelectRequest{AffinityTarget: &AffinityTarget{WorkerID: u(2)}, AllowedWorkerIDs: []uint64{1, 3}}, kvwire.Owner{Worker: 1}, ""},
		{"affinity to an unknown worker is ignored", SelectRequest{AffinityTarget: &AffinityTarget{WorkerID: u(42)}}, kvwire.Owner{Worker: 1}, ""},
		{"allowed ids restrict", SelectRequest{AllowedWorkerIDs: []uint64{2}}, kvwire.Owner{Worker: 2}, ""},
		{"allowed ids unknown", SelectRequest{AllowedWorkerIDs: []uint64{42}}, kvwire.Owner{}, "no endpoints available to route work"},
		{"allowed ids empty list", SelectRequest{AllowedWorkerIDs: []uint64{}}, kvwire.Owner{}, "no endpoints available to route work"},
		{"required taints all present", SelectRequest{RoutingConstraints: &RoutingConstraints{RequiredTaints: []string{"gpu-b"}}}, kvwire.Owner{Worker: 2}, ""},
		{"required taints need all", SelectRequest{RoutingConstraints: &RoutingConstraints{RequiredTaints: []string{"gpu-a", "gpu-b"}}}, kvwire.Owner{}, "no endpoints available to route work"},
		{"required taints with allowed ids", SelectRequest{AllowedWorkerIDs: []uint64{1, 2}, RoutingConstraints: &RoutingConstraints{RequiredTaints: []string{"zone-1", "gpu-a"}}}, kvwire.Owner{Worker: 1}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pick(&tc.req)
			if tc.wantErr != "" {
				wantErr(t, err, ErrNoEndpoints, tc.wantErr)
				return
			}
			noErr(t, err)
			if got != tc.want {
				t.Fatalf("picked %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPreferredTaints: a preferred taint's multiplier exp(-tanh(w)) breaks what would be a
// random tie between two identical workers, every time.
func TestPreferredTaints(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.Taints = []string{"fast"} }))
	mustUpsert(t, e, spec(2, func(s *WorkerSpec) { s.Taints = []string{"slow"} }))
	// Without preferences the two workers tie exactly, so both must be picked often.
	counts := map[uint64]int{}
	for i := 0; i < 200; i++ {
		r := selReq("", toks(0, 16))
		resp, err := e.Select(r, t0)
		noErr(t, err)
		counts[resp.WorkerID]++
	}
	if counts[1] < 50 || counts[2] < 50 {
		t.Fatalf("ties are not broken at random: %v", counts)
	}
	// Any positive preferred weight on the worker's taint (or a negative one on the other's)
	// lowers its multiplier below the other's, turning the tie into a strict preference.
	for _, pref := range []map[string]float32{{"slow": 0.5}, {"slow": 2, "absent": 5}, {"fast": -1}} {
		for i := 0; i < 50; i++ {
			r := selReq("", toks(0, 16))
			r.RoutingConstraints = &RoutingConstraints{PreferredTaints: pref}
			resp, err := e.Select(r, t0)
			noErr(t, err)
			if resp.WorkerID != 2 {
				t.Fatalf("preferred %v picked worker %d", pref, resp.WorkerID)
			}
		}
	}
	if m := preferredTaintMultiplier(map[string]struct{}{"a": {}}, map[string]float32{"a": 1, "b": 3}, []string{"a", "b"}); m < 0.4669 || m > 0.4671 {
		t.Fatalf("multiplier exp(-tanh(1)) = %v", m)
	}
}

// TestSelectAdvisory: advisory selections add worker_load (the rank's current load, without the
// probing prompt: Dynamo reports an idle worker as 0), prefill_busy only with a threshold, and
// skip queue admission.
func TestSelectAdvisory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrefillBusyThreshold = ptr(0.5)
	cfg.QueueThreshold = ptr(0.5)
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) {
		s.MaxNumBatchedTokens = ptr(uint64(100))
		s.TotalKVBlocks = ptr(uint64(50))
	}))
	adv := selReq("", toks(0, 40))
	adv.Advisory = true
	resp, err := e.Select(adv, t0)
	noErr(t, err)
	// active_prefill_tokens is the idle rank's current load: the 40 probing tokens are not in it.
	wl := resp.WorkerLoad
	if wl == nil || wl.ActivePrefillTokens != 0 || wl.PrefillTokenCapacity != 100 || *wl.TotalKVBlocks != 50 || *wl.PrefillBusy {
		t.Fatalf("worker_load %+v", wl)
	}
	plain, err := e.Select(selReq("", toks(0, 40)), t0)
	noErr(t, err)
	if plain.WorkerLoad != nil {
		t.Fatalf("non-advisory select has worker_load")
	}

	// 60 prefill tokens in flight: 60 > 0.5·100, so the only rank is busy.
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("big"), WorkerID: ptr(uint64(1)),
		Prompt: Prompt{SequenceHashes: []int64{}, ISLTokens: ptr(uint64(60))}, EffectivePrefillTokens: ptr(uint64(60))}, t0)
	noErr(t, err)
	_, err = e.Select(selReq("", toks(0, 40)), t0)
	wantErr(t, err, ErrOverloaded, "all eligible workers are overloaded")
	var ee *Error
	if !errors.As(err, &ee) || ee.Details.(QueueRejection).LimitKind != "prefill_tokens" {
		t.Fatalf("rejection details %#v", ee)
	}
	// select_and_reserve never skips admission (advisory is ignored there).
	_, err = e.SelectAndReserve(selReq("q", toks(0, 40)), t0)
	wantErr(t, err, ErrOverloaded)
	resp, err = e.Select(adv, t0)
	noErr(t, err)
	if wl := resp.WorkerLoad; wl.ActivePrefillTokens != 60 || !*wl.PrefillBusy {
		t.Fatalf("busy worker_load %+v", wl)
	}

	// Without the threshold prefill_busy is omitted; without max_num_batched_tokens the
	// capacity is Dynamo's default.
	plainEng := newEngine(t, nil)
	mustUpsert(t, plainEng, spec(1))
	resp, err = plainEng.Select(adv, t0)
	noErr(t, err)
	if wl := resp.WorkerLoad; wl.PrefillBusy != nil || wl.PrefillTokenCapacity != DefaultPrefillCapacity || wl.TotalKVBlocks != nil {
		t.Fatalf("defaults worker_load %+v", wl)
	}
}

// TestDecodeBusy: decode_busy compares potential_decode_blocks with threshold·total_kv_blocks
// and is omitted when either is unknown.
func TestDecodeBusy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DecodeBusyThreshold = ptr(0.5)
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(10)) }))
	mustUpsert(t, e, spec(2, inModel("m", "g")))
	// Threshold 0.5 × 10 blocks = 5: busy iff the projection exceeds 5 blocks. The projection
	// counts a partial trailing block (18 tokens = 4 blocks + 1, 21 tokens = 5 + 1).
	for _, tc := range []struct {
		tokens    int
		potential uint64
		busy      bool
	}{{20, 5, false}, {24, 6, true}, {18, 5, false}, {21, 6, true}} {
		resp, err := e.Select(selReq("", toks(0, tc.tokens)), t0)
		noErr(t, err)
		if resp.PotentialDecodeBlocks != tc.potential || resp.DecodeBusy == nil || *resp.DecodeBusy != tc.busy {
			t.Fatalf("%d tokens: potential %d decode_busy %v, want %d/%v", tc.tokens, resp.PotentialDecodeBlocks, resp.DecodeBusy, tc.potential, tc.busy)
		}
	}
	resp, err := e.Select(&SelectRequest{ModelName: ptr("m"), RoutingGroup: ptr("g"), Prompt: tokenPrompt(toks(0, 40))}, t0)
	noErr(t, err)
	if resp.DecodeBusy != nil {
		t.Fatalf("decode_busy without total_kv_blocks")
	}
	plain := newEngine(t, nil)
	mustUpsert(t, plain, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(1)) }))
	resp, _ = plain.Select(selReq("", toks(0, 40)), t0)
	if resp.DecodeBusy != nil {
		t.Fatalf("decode_busy without a threshold")
	}
}

// TestPotentialDecodeBlocks: the projection counts the partial trailing block (variant (a) of
// spec §6) and does not count blocks already live on the rank.
func TestPotentialDecodeBlocks(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	resp, err := e.SelectAndReserve(selReq("a", toks(0, 18)), t0)
	noErr(t, err)
	if resp.PotentialDecodeBlocks != 5 || len(resp.SequenceHashes) != 4 {
		t.Fatalf("first: potential %d with %d hashes, want 5 with 4", resp.PotentialDecodeBlocks, len(resp.SequenceHashes))
	}
	resp, err = e.Select(selReq("", toks(0, 18)), t0)
	noErr(t, err)
	if resp.PotentialDecodeBlocks != 5 {
		t.Fatalf("shared prefix: potential %d, want 4 live + 0 new + 1 partial", resp.PotentialDecodeBlocks)
	}
	resp, _ = e.Select(selReq("", toks(100, 8)), t0)
	if resp.PotentialDecodeBlocks != 6 {
		t.Fatalf("disjoint prompt: potential %d, want 4 live + 2 new", resp.PotentialDecodeBlocks)
	}
}

// TestOverlapSummary: tier summaries are cumulative token counts over every rank of the chosen
// worker, zero-overlap ranks included, with gpu ≤ cpu ≤ disk; effective_prefill_tokens uses the
// weighted credit.
func TestOverlapSummary(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(0, 3)))
	mustUpsert(t, e, spec(2))
	prompt := toks(0, 24) // 6 blocks
	r0, r1 := kvwire.Owner{Worker: 1, Rank: 0}, kvwire.Owner{Worker: 1, Rank: 1}
	storeTier(t, e, r0, TierOf("device"), nil, prompt[:8])
	storeTier(t, e, r0, TierOf("disk"), prompt[:8], prompt[8:16])
	storeTier(t, e, r1, TierOf("device"), nil, prompt[:4])
	storeTier(t, e, r1, TierOf("host_pinned"), prompt[:4], prompt[4:12])
	store(t, e, kvwire.Owner{Worker: 2}, prompt[:24])

	sel := func(rank uint32) *SelectResponse {
		t.Helper()
		r := selReq("", prompt)
		r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(rank)}
		resp, err := e.Select(r, t0)
		noErr(t, err)
		return resp
	}
	// Per rank (tokens): r0 device 8, disk 8+8 = 16; r1 device 4, host 4+8 = 12; r2 nothing.
	// Instance view: gpu = max device = 8, cpu = max host = 12, disk = max disk = 16, and dp lists
	// every rank's device tokens, whichever rank was picked.
	want := OverlapSummary{LongestMatched: 16, GPU: 8, CPU: 12, Disk: 16, DP: map[string]uint64{"0": 8, "1": 4, "2": 0}}
	for rank, eff := range map[uint32]uint64{0: 24 - 10, 1: 24 - 10, 2: 24} {
		resp := sel(rank)
		got, _ := json.Marshal(resp.Overlap)
		exp, _ := json.Marshal(want)
		if string(got) != string(exp) {
			t.Fatalf("rank %d overlap %s, want %s", rank, got, exp)
		}
		// rank 0: round((2 + 0.25·2)·4) = 10 cached; rank 1: round((1 + 0.75·2)·4) = 10.
		if resp.EffectivePrefillTokens != eff {
			t.Fatalf("rank %d effective_prefill_tokens %d, want %d", rank, resp.EffectivePrefillTokens, eff)
		}
	}
	// Worker 2 holds everything on device: it is the free choice.
	resp, err := e.Select(selReq("", prompt), t0)
	noErr(t, err)
	if resp.WorkerID != 2 || resp.EffectivePrefillTokens != 0 || resp.Overlap.LongestMatched != 24 || len(resp.Overlap.DP) != 1 {
		t.Fatalf("free choice %+v", resp)
	}
	// A prompt nobody holds still lists every rank of the chosen worker.
	r := selReq("", toks(1000, 8))
	r.AllowedWorkerIDs = []uint64{1}
	resp, err = e.Select(r, t0)
	noErr(t, err)
	if len(resp.Overlap.DP) != 3 || resp.Overlap.DP["2"] != 0 || resp.Overlap.LongestMatched != 0 {
		t.Fatalf("zero-overlap summary %+v", resp.Overlap)
	}
}

// TierOf parses a tier name for tests (panics on a typo, which fails the test loudly).
func TierOf(name string) kvwire.Tier {
	for t := kvwire.Tier(0); t < 4; t++ {
		if t.String() == name {
			return t
		}
	}
	panic("unknown tier " + name)
}

// TestSelectResponseShape pins the JSON keys of /select and /select_and_reserve.
func TestSelectResponseShape(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	keys := func(v any) map[string]bool {
		raw, _ := json.Marshal(v)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		out := map[string]bool{}
		for k := range m {
			out[k] = true
		}
		return out
	}
	// Keys every selection carries, and keys that must never appear (removed upstream fields).
	base := []string{"model_name", "routing_group", "worker_id", "dp_rank", "endpoint", "block_size", "overlap", "effective_prefill_tokens", "potential_decode_blocks"}
	never := []string{"cached_tokens", "effective_overlap_blocks", "tenant_id"}

	resp, err := e.Select(selReq("", toks(0, 8)), t0)
	noErr(t, err)
	k := keys(resp)
	for _, f := range base {
		if !k[f] {
			t.Errorf("select lacks %s", f)
		}
	}
	for _, f := range append([]string{"selection_id", "sequence_hashes", "isl_tokens", "track_prefill_tokens", "kv_hint", "worker_load", "decode_busy"}, never...) {
		if k[f] {
			t.Errorf("select has %s", f)
		}
	}
	resp, err = e.Select(selReq("s", toks(0, 8)), t0)
	noErr(t, err)
	if !keys(resp)["selection_id"] || *resp.SelectionID != "s" {
		t.Errorf("selection_id not echoed")
	}
	resp, err = e.SelectAndReserve(selReq("r", toks(0, 8)), t0)
	noErr(t, err)
	k = keys(resp)
	for _, f := range append(base, "selection_id", "sequence_hashes", "isl_tokens", "track_prefill_tokens") {
		if !k[f] {
			t.Errorf("select_and_reserve lacks %s", f)
		}
	}
	for _, f := range never {
		if k[f] {
			t.Errorf("select_and_reserve has %s", f)
		}
	}
	raw, _ := json.Marshal(resp)
	if !strings.Contains(string(raw), `"dp":{"0":0}`) {
		t.Errorf("zero-overlap dp rank missing: %s", raw)
	}
}

// TestConfigOverrides: per-request overrides change the booking decision and the cost inputs.
func TestConfigOverrides(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	r := selReq("a", toks(0, 16))
	r.RouterConfigOverride = &ConfigOverride{TrackPrefillTokens: ptr(false), AssumeKVReuse: ptr(false)}
	resp, err := e.SelectAndReserve(r, t0)
	noErr(t, err)
	if resp.TrackPrefillTokens || uint64(resp.SequenceHashes[0]) == goldenVectors[0].seq[0] {
		t.Fatalf("overrides ignored: track %v seq %v", resp.TrackPrefillTokens, resp.SequenceHashes)
	}
	if l := loadOf(e, defKey, kvwire.Owner{Worker: 1}); l.PotentialPrefillTokens != 0 || l.PotentialDecodeBlocks != 4 {
		t.Fatalf("untracked booking load %+v", l)
	}
	// The deprecated overlap_score_weight maps like DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT (§13.2).
	w := e.weightsFor(&ConfigOverride{OverlapScoreWeight: ptr(0.0)})
	if w.scale != 0 || w.credit != 0 {
		t.Fatalf("overlap_score_weight=0 must zero scale and credit: %+v", w)
	}
	w = e.weightsFor(&ConfigOverride{OverlapScoreWeight: ptr(2.0), PrefillLoadScale: ptr(3.0), OverlapScoreCredit: ptr(0.5)})
	if w.scale != 3 || w.credit != 0.5 {
		t.Fatalf("explicit fields must win over the deprecated alias: %+v", w)
	}
}
