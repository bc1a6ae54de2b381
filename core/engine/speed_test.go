package engine

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// synthFleet is a deterministic synthetic fleet driven through the engine's public lifecycle:
// each rank prefills one request at a time in booking order, taking truth[rank] × noise ms,
// with rare 8× outliers; the engine picks the rank (kvselect policy), sees prefill_complete at
// the simulated completion time and free right after. The engine never sees truth.
type synthFleet struct {
	truth  map[kvwire.Owner]PrefillModel
	freeAt map[kvwire.Owner]float64 // ms at which each rank's prefill unit is free
	rng    *rand.Rand
	queued int
	picks  []kvwire.Owner
}

type doneEv struct {
	at float64
	id string
}
type doneHeap []doneEv

func (h doneHeap) Len() int { return len(h) }
func (h doneHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].id < h[j].id)
}
func (h doneHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *doneHeap) Push(x any)   { *h = append(*h, x.(doneEv)) }
func (h *doneHeap) Pop() any     { o := *h; x := o[len(o)-1]; *h = o[:len(o)-1]; return x }

func msTime(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// run books n requests with the given mean gap (ms).
func (f *synthFleet) run(t *testing.T, e *Engine, n int, gapMS float64) {
	t.Helper()
	var done doneHeap
	now := 0.0
	complete := func(until float64) {
		for done.Len() > 0 && done[0].at <= until {
			d := heap.Pop(&done).(doneEv)
			if err := e.PrefillCompleteAt(d.id, msTime(d.at)); err != nil {
				t.Fatal(err)
			}
			if err := e.Free(d.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range n {
		now += f.rng.ExpFloat64() * gapMS
		complete(now)
		tokens := 256 + f.rng.IntN(8192)
		id := fmt.Sprintf("q%d", i)
		resp, err := e.SelectAndReserve(selReq(id, toks(i*10_000, tokens)), msTime(now))
		if err != nil {
			t.Fatal(err)
		}
		o := kvwire.Owner{Worker: resp.WorkerID, Rank: resp.DPRank}
		f.picks = append(f.picks, o)
		start := max(now, f.freeAt[o])
		if start > now {
			f.queued++
		}
		ms := f.truth[o].MS(float64(tokens)) * max(0.5, 1+0.1*f.rng.NormFloat64())
		if f.rng.Float64() < 0.02 {
			ms *= 8
		}
		f.freeAt[o] = start + ms
		heap.Push(&done, doneEv{f.freeAt[o], id})
		e.TakeEffects(nil)
	}
	complete(math.Inf(1))
}

func scaled(m PrefillModel, s float64) PrefillModel {
	return PrefillModel{A: m.A * s, B: m.B * s, C: m.C * s}
}

// newSynthFleet registers worker 1 (two DP ranks) and worker 2 on a kvselect engine; the ranks'
// true speeds are 1.5×, 3× and 0.7× the configured prior.
func newSynthFleet(t *testing.T, seed uint64) (*Engine, *synthFleet) {
	cfg := KVSelectDefaults()
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, dp(0, 2), func(s *WorkerSpec) { s.BlockSize = ptr(uint32(16)) }))
	mustUpsert(t, e, spec(2, func(s *WorkerSpec) { s.BlockSize = ptr(uint32(16)) }))
	prior := cfg.priorSpeed(0)
	f := &synthFleet{
		truth:  map[kvwire.Owner]PrefillModel{{Worker: 1, Rank: 0}: scaled(prior, 1.5), {Worker: 1, Rank: 1}: scaled(prior, 3), {Worker: 2, Rank: 0}: scaled(prior, 0.7)},
		freeAt: map[kvwire.Owner]float64{}, rng: rand.New(rand.NewPCG(seed, 3)),
	}
	return e, f
}

// TestLearnedSpeedWithin10Percent: after 500 requests through the engine, with queueing, noise
// and outliers, every rank's learned prefill model is within 10 % of its true one, per DP rank.
func TestLearnedSpeedWithin10Percent(t *testing.T) {
	e, f := newSynthFleet(t, 1)
	f.run(t, e, 500, 70)
	if f.queued < 100 {
		t.Fatalf("only %d of 500 requests queued: the test must exercise queueing", f.queued)
	}
	rows := e.LoadsWithSpeeds("", "")[0].PrefillSpeeds
	if len(rows) != 3 {
		t.Fatalf("%d speed rows, want 3", len(rows))
	}
	for _, r := range rows {
		o := kvwire.Owner{Worker: r.WorkerID, Rank: r.DPRank}
		got := PrefillModel{A: r.MSPerTokenSquared, B: r.MSPerToken, C: r.OverheadMS}
		for _, tok := range []float64{500, 4000, 8000} {
			want := f.truth[o].MS(tok)
			if d := math.Abs(got.MS(tok)-want) / want; d > 0.10 {
				t.Errorf("rank %v after %d samples: %.1f ms at %v tokens, truth %.1f (%.1f%% off)", o, r.Samples, got.MS(tok), tok, want, 100*d)
			}
		}
		t.Logf("rank %v: %d samples, confidence %.2f, %.4f ms/token (truth %.4f)", o, r.Samples, r.Confidence, r.MSPerToken, f.truth[o].B)
		if r.Samples < 30 || !(r.Confidence > 0 && r.Confidence <= 1) {
			t.Errorf("rank %v: %d samples, confidence %v", o, r.Samples, r.Confidence)
		}
	}
}

// TestLearnedSpeedSteersAwayFromASlowRank: the cost prices each rank at its learned speed, so
// the rank three times slower than the prior (and four times slower than the fastest) ends up
// with the fewest requests once learned.
func TestLearnedSpeedSteersAwayFromASlowRank(t *testing.T) {
	e, f := newSynthFleet(t, 2)
	f.run(t, e, 600, 70)
	late := map[kvwire.Owner]int{}
	for _, o := range f.picks[300:] {
		late[o]++
	}
	slow, fast := late[kvwire.Owner{Worker: 1, Rank: 1}], late[kvwire.Owner{Worker: 2, Rank: 0}]
	if !(slow < fast) {
		t.Fatalf("requests 300-599: slow rank %d, fast rank %d (%v)", slow, fast, late)
	}
}

// TestLearnedSpeedDeterministic: the same inputs give the same decisions and the same speeds.
func TestLearnedSpeedDeterministic(t *testing.T) {
	e1, f1 := newSynthFleet(t, 3)
	f1.run(t, e1, 300, 70)
	e2, f2 := newSynthFleet(t, 3)
	f2.run(t, e2, 300, 70)
	if !slices.Equal(f1.picks, f2.picks) {
		t.Fatal("same inputs, different decisions")
	}
	if a, b := e1.LoadsWithSpeeds("", "")[0].PrefillSpeeds, e2.LoadsWithSpeeds("", "")[0].PrefillSpeeds; !slices.Equal(a, b) {
		t.Fatalf("same inputs, different speeds: %v vs %v", a, b)
	}
}
