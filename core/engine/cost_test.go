package engine

// Cost-function and picker tests: the worked example of spec §5.3 rebuilt through the public
// API, a property test of costs() against a literal transcription of the spec's formula,
// seeded-deterministic random tie-breaks at T=0, and the softmax distribution at T>0.

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// workedExample builds spec §5.3's example through the public API: three workers, a 10-block
// prompt (raw prefill 10 blocks each), device overlaps 2/5/8 blocks and decode costs 10/5/9.
//
// Decode cost = active blocks + (prompt blocks not live on the rank). Workers 2 and 3 each carry
// a booking of the same prompt (so all 10 prompt blocks are live, adding nothing) whose
// exclusive blocks — 10 prompt blocks and 1 output block — are weighted down with an
// output_block decay fraction: 11·5/11 = 5 and 11·9/11 = 9 active blocks. Prefill of those
// bookings is untracked, so every rank's raw prefill is exactly isl = 40 tokens = 10 blocks.
func workedExample(t testing.TB, cfg *Config) (*Engine, []uint32) {
	t.Helper()
	e := newEngine(t, cfg)
	prompt := toks(0, 40)
	for id, overlap := range map[uint64]int{1: 2, 2: 5, 3: 8} {
		mustUpsert(t, e, spec(id))
		store(t, e, kvwire.Owner{Worker: id}, prompt[:overlap*4])
	}
	for id, active := range map[uint64]float64{2: 5, 3: 9} {
		sid := string(rune('a' + id))
		_, err := e.Reserve(&ReservationRequest{SelectionID: &sid, WorkerID: ptr(id), Prompt: tokenPrompt(prompt), TrackPrefillTokens: ptr(false)}, t0)
		noErr(t, err)
		noErr(t, e.OutputBlock(sid, ptr(active/11)))
	}
	return e, prompt
}

// TestWorkedExample reproduces costs 18/10/11 and the choice of worker 2.
func TestWorkedExample(t *testing.T) {
	e, prompt := workedExample(t, nil)

	// The public projection shows the example's inputs: decode 10/5/9 blocks and prefill
	// isl − cached = 40 − 4·overlap tokens.
	pl, err := e.PotentialLoads(&PromptQuery{Prompt: tokenPrompt(prompt)})
	noErr(t, err)
	wantDecode := map[uint64]uint64{1: 10, 2: 5, 3: 9}
	wantPrefill := map[uint64]uint64{1: 40 - 8, 2: 40 - 20, 3: 40 - 32}
	for _, l := range pl {
		if l.PotentialDecodeBlocks != wantDecode[l.WorkerID] || l.PotentialPrefillTokens != wantPrefill[l.WorkerID] {
			t.Fatalf("worker %d potential load %+v, want decode %d prefill %d", l.WorkerID, l, wantDecode[l.WorkerID], wantPrefill[l.WorkerID])
		}
	}

	// cost = (10 − overlap) + decode: 8+10 = 18, 5+5 = 10, 2+9 = 11.
	p := e.parts[defKey]
	pr := tokenPrompt(prompt)
	n, err := e.normalize(p, &pr, true, true)
	noErr(t, err)
	cs := e.score(p, &n, e.weightsFor(nil))
	got := map[uint64]float64{}
	for _, c := range cs {
		got[c.Owner.Worker] = c.cost
	}
	if got[1] != 18 || got[2] != 10 || got[3] != 11 {
		t.Fatalf("costs %v, want 1:18 2:10 3:11", got)
	}
	for i := 0; i < 20; i++ {
		resp, err := e.Select(selReq("", prompt), t0)
		noErr(t, err)
		if resp.WorkerID != 2 || resp.EffectivePrefillTokens != 20 || resp.PotentialDecodeBlocks != 5 {
			t.Fatalf("picked %d (effective %d, decode %d), want worker 2 (20, 5)", resp.WorkerID, resp.EffectivePrefillTokens, resp.PotentialDecodeBlocks)
		}
	}
}

// TestSoftmaxFavoursCheaper: at T=1 on the worked example, p_i ∝ exp(−(c_i − 10)/(8·1)), so
// the frequencies of workers 1/2/3 approach 0.164/0.444/0.392 (checked within 4σ with a fixed
// seed, which makes the test deterministic).
func TestSoftmaxFavoursCheaper(t *testing.T) {
	e, prompt := workedExample(t, nil)
	const n = 4000
	counts := map[uint64]int{}
	for i := 0; i < n; i++ {
		r := selReq("", prompt)
		r.RouterConfigOverride = &ConfigOverride{RouterTemperature: ptr(1.0)}
		resp, err := e.Select(r, t0)
		noErr(t, err)
		counts[resp.WorkerID]++
	}
	w := map[uint64]float64{1: math.Exp(-1), 2: 1, 3: math.Exp(-1.0 / 8)}
	sum := w[1] + w[2] + w[3]
	for id, wt := range w {
		p := wt / sum
		sigma := math.Sqrt(p * (1 - p) / n)
		if f := float64(counts[id]) / n; math.Abs(f-p) > 4*sigma {
			t.Errorf("worker %d frequency %.3f, want %.3f ± %.3f", id, f, p, 4*sigma)
		}
	}
	if !(counts[2] > counts[3] && counts[3] > counts[1]) {
		t.Errorf("softmax does not order by cost: %v", counts)
	}
	// A higher temperature flattens the distribution toward uniform.
	hot := map[uint64]int{}
	for i := 0; i < n; i++ {
		r := selReq("", prompt)
		r.RouterConfigOverride = &ConfigOverride{RouterTemperature: ptr(100.0)}
		resp, _ := e.Select(r, t0)
		hot[resp.WorkerID]++
	}
	if hot[1] < counts[1] || hot[1] < n/4 {
		t.Errorf("T=100 should be near uniform: %v (T=1: %v)", hot, counts)
	}
}

// TestTieBreakSeeded: at T=0, ties between identical workers are broken uniformly at random,
// and the same seed reproduces the same sequence of picks.
func TestTieBreakSeeded(t *testing.T) {
	run := func(seed uint64) ([]uint64, map[uint64]int) {
		c := DefaultConfig()
		e, err := New(c, Options{Rand: rand.New(rand.NewPCG(seed, 99))})
		noErr(t, err)
		for id := uint64(1); id <= 4; id++ {
			mustUpsert(t, e, spec(id))
		}
		var seq []uint64
		counts := map[uint64]int{}
		for i := 0; i < 800; i++ {
			resp, err := e.Select(selReq("", toks(0, 16)), t0)
			noErr(t, err)
			seq = append(seq, resp.WorkerID)
			counts[resp.WorkerID]++
		}
		return seq, counts
	}
	a, counts := run(1)
	b, _ := run(1)
	c, _ := run(2)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different picks")
	}
	if slices.Equal(a, c) {
		t.Fatalf("different seeds, identical picks: tie-breaks are not random")
	}
	// Uniform over 4: 200 each, σ ≈ 12.2; allow 5σ.
	for id := uint64(1); id <= 4; id++ {
		if counts[id] < 139 || counts[id] > 261 {
			t.Fatalf("tie-break frequencies %v are not uniform", counts)
		}
	}
}

// TestPickEdgeCases: ineligible candidates are never picked, no eligible candidate gives -1, and
// equal or unbounded costs at T>0 fall back to a uniform draw.
func TestPickEdgeCases(t *testing.T) {
	e := newEngine(t, nil)
	mk := func(costs ...float64) []scored {
		out := make([]scored, len(costs))
		for i, c := range costs {
			out[i] = scored{cost: c, eligible: !math.IsNaN(c)}
			if math.IsNaN(c) {
				out[i].cost = -1e9 // cheapest, but ineligible
			}
		}
		return out
	}
	// NaN marks an ineligible candidate in mk; the ineligible ones are made cheapest on purpose.
	nan := math.NaN()
	for _, temp := range []float64{0, 0.5} {
		if i := e.pick(mk(nan, nan), temp); i != -1 {
			t.Fatalf("T=%v: picked %d with no eligible candidate", temp, i)
		}
		if i := e.pick(nil, temp); i != -1 {
			t.Fatalf("T=%v: picked %d from nothing", temp, i)
		}
		for k := 0; k < 200; k++ {
			if i := e.pick(mk(nan, 3, nan, 5), temp); i != 1 && i != 3 {
				t.Fatalf("T=%v: picked ineligible %d", temp, i)
			}
		}
	}
	if i := e.pick(mk(nan, 3, nan, 5), 0); i != 1 {
		t.Fatalf("T=0 picked %d, want the arg-min 1", i)
	}
	for _, costs := range [][]float64{{7, 7, 7}, {1, math.Inf(1), 2}} {
		seen := map[int]bool{}
		for k := 0; k < 300; k++ {
			seen[e.softmax(mk(costs...), 1)] = true
		}
		if len(seen) != 3 {
			t.Fatalf("costs %v: uniform fallback reached only %v", costs, seen)
		}
	}
}

// costSpec transcribes spec §5.2–§5.3 literally for one candidate (aggregated worker type, no
// shared cache), plus kvselect's decode_load_scale weight (1 = Dynamo). minActive is the
// minimum active prefill over eligible ranks.
func costSpec(s scored, isl uint64, bs uint32, w weights, minActive uint64, nseq int) float64 {
	eff := float64(s.DeviceBlocks) + w.host*float64(s.HostExtBlocks) + w.disk*float64(s.DiskExtBlocks)
	cached := uint64(math.Round(math.Max(0, eff*float64(bs))))
	var raw float64
	if w.trackPrefill {
		raw = float64(s.Load.ActivePrefillTokens + (isl - min(cached, isl)) + cached)
	}
	reqBlocks := float64((isl + uint64(bs) - 1) / uint64(bs))
	decay := 1.0
	if w.trackPrefill && w.decay > 0 {
		decay = 1 / (1 + w.decay*(float64(s.Load.ActivePrefillTokens-minActive)/float64(bs))/reqBlocks)
	}
	credit := w.credit*decay*float64(s.DeviceBlocks) + w.host*float64(s.HostExtBlocks) + w.disk*float64(s.DiskExtBlocks)
	potentialDecode := float64(s.Load.ActiveBlocks) + float64(nseq-s.BookedPrefixBlocks)
	return w.scale*math.Max(0, raw/float64(bs)-credit) + potentialDecode + w.reqWeight*float64(s.Load.ActiveRequests)
}

// TestCostsMatchSpec: costs() equals the literal formula on random inputs, including decay,
// lower tiers, request weight and untracked prefill.
func TestCostsMatchSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := newEngine(t, nil).weightsFor(nil)
	// Inputs respect the engine's invariants: tiers never extend past the prompt, and a rank's
	// live prefix is part of its active blocks.
	for iter := 0; iter < 2000; iter++ {
		bs := uint32(1 + rng.IntN(32))
		nseq := rng.IntN(64)
		n := normalized{isl: uint64(nseq)*uint64(bs) + uint64(rng.IntN(int(bs))) + 1, seq: make([]uint64, nseq)}
		// Start from the defaults so weights added later keep their neutral values.
		w := base
		w.credit, w.decay, w.scale = rng.Float64()*2, float64(rng.IntN(3))*rng.Float64(), rng.Float64()*2
		w.host, w.disk, w.reqWeight = rng.Float64(), rng.Float64(), float64(rng.IntN(2))*rng.Float64()
		w.trackPrefill = rng.IntN(4) != 0
		cs := make([]scored, 1+rng.IntN(6))
		minActive := uint64(math.MaxUint64)
		for i := range cs {
			dev := rng.IntN(nseq + 1)
			host := rng.IntN(nseq - dev + 1)
			disk := rng.IntN(nseq - dev - host + 1)
			cs[i] = scored{eligible: true, Candidate: Candidate{DeviceBlocks: int32(dev), HostExtBlocks: int32(host), DiskExtBlocks: int32(disk), BookedPrefixBlocks: rng.IntN(nseq + 1), Load: new(load.RankLoad)}}
			cs[i].Load.ActivePrefillTokens = uint64(rng.IntN(5000))
			cs[i].Load.ActiveBlocks = uint64(cs[i].BookedPrefixBlocks + rng.IntN(100))
			cs[i].Load.ActiveRequests = rng.IntN(10)
			minActive = min(minActive, cs[i].Load.ActivePrefillTokens)
		}
		w.policy.costs(cs, n, bs, w)
		for i := range cs {
			want := costSpec(cs[i], n.isl, bs, w, minActive, nseq)
			if math.Abs(cs[i].cost-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Fatalf("iter %d candidate %d: cost %v, spec %v (inputs %+v, weights %+v, isl %d bs %d)", iter, i, cs[i].cost, want, cs[i], w, n.isl, bs)
			}
		}
	}
}
