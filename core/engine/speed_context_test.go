package engine

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestContextShareLearnedThroughLifecycle drives a two-worker kvselect engine through its public
// lifecycle with prompts of which half extend a 32,768-token prefix both workers hold (KV
// events) and half are cached nowhere. Each worker prefills one request at a time, taking its
// true model's time for the booking's uncached tokens after its cached ones — a model that pays
// 0.8 × the prior's attention per pair for the cached context. The engine sees bookings,
// completions and frees only; it must learn that share for the partition (within 10 %) and
// predict both a miss and a long hit within 10 % on each worker, which a context-free fit
// cannot (it prices the hit ~30 % low or the miss high).
func TestContextShareLearnedThroughLifecycle(t *testing.T) {
	cfg := KVSelectDefaults()
	e := newEngine(t, &cfg)
	prior := cfg.priorSpeed(0)
	prefix := toks(1_000_000, 32768)
	truth := map[kvwire.Owner]PrefillModel{}
	for _, ws := range []struct {
		w uint64
		s float64
	}{{1, 1.5}, {2, 2.5}} {
		w, s := ws.w, ws.s
		mustUpsert(t, e, spec(w))
		o := kvwire.Owner{Worker: w}
		store(t, e, o, prefix)
		m := scaled(prior, s)
		m.K = s * 0.8 * 2 * prior.A
		truth[o] = m
	}
	rng := rand.New(rand.NewPCG(5, 8))
	freeAt := map[kvwire.Owner]float64{}
	var done doneHeap
	now := 0.0
	complete := func(until float64) {
		for done.Len() > 0 && done[0].at <= until {
			d := heap.Pop(&done).(doneEv)
			noErr(t, e.PrefillCompleteAt(d.id, msTime(d.at)))
			noErr(t, e.Free(d.id))
		}
	}
	for i := range 700 {
		now += rng.ExpFloat64() * 300
		complete(now)
		prompt := toks(i*20_000, 256+rng.IntN(8192))
		if rng.IntN(2) == 0 {
			prompt = cat(prefix, toks(i*20_000, 256+rng.IntN(2048)))
		}
		id := fmt.Sprintf("c%d", i)
		resp, err := e.SelectAndReserve(selReq(id, prompt), msTime(now))
		noErr(t, err)
		o := kvwire.Owner{Worker: resp.WorkerID, Rank: resp.DPRank}
		uncached := float64(resp.EffectivePrefillTokens)
		ms := truth[o].WorkMS(uncached, float64(len(prompt))-uncached) * max(0.5, 1+0.05*rng.NormFloat64())
		freeAt[o] = max(now, freeAt[o]) + ms
		heap.Push(&done, doneEv{freeAt[o], id})
		e.TakeEffects(nil)
	}
	complete(math.Inf(1))
	for _, r := range e.LoadsWithSpeeds("", "")[0].PrefillSpeeds {
		o := kvwire.Owner{Worker: r.WorkerID, Rank: r.DPRank}
		got := PrefillModel{A: r.MSPerTokenSquared, B: r.MSPerToken, C: r.OverheadMS, K: r.MSPerTokenContextToken}
		if share := got.K / (2 * got.A); math.Abs(share-0.8) > 0.08 {
			t.Errorf("worker %d learned a context share of %.3f, truth 0.8", o.Worker, share)
		}
		for _, c := range [][2]float64{{4000, 0}, {1000, 32768}} {
			want := truth[o].WorkMS(c[0], c[1])
			if d := math.Abs(got.WorkMS(c[0], c[1])-want) / want; d > 0.10 {
				t.Errorf("worker %d after %d samples: %.0f tokens after %.0f cached priced %.1f ms, truth %.1f (%.1f%% off)", o.Worker, r.Samples, c[0], c[1], got.WorkMS(c[0], c[1]), want, 100*d)
			}
		}
	}
}
