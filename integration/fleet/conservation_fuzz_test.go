package fleet

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// stressCase is a random small engine and workload: tiny caches that force preemption,
// requests that can never fit, zero-token outputs and prompts, shared prefixes.
type stressCase struct {
	bs, blocks, budget, seqs int
	arr                      []arrival
}

func newStressCase(seed uint64) stressCase {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := stressCase{bs: 1 + rng.IntN(8), blocks: 1 + rng.IntN(16), budget: 1 + rng.IntN(64), seqs: 1 + rng.IntN(6)}
	at := 0.0
	for i := range 1 + rng.IntN(40) {
		at += float64(rng.IntN(3)) * rng.Float64() * 5 // bursts at equal times too
		prompt := rng.IntN(12 * c.bs)                  // 0 is never valid
		nb := ceilDiv(prompt, c.bs)
		bl := make([]uint64, nb)
		family := uint64(rng.IntN(3)) * 1000 // shared prefixes
		for j := range bl {
			bl[j] = family + uint64(j)
			if rng.IntN(4) == 0 {
				bl[j] += uint64(100 + i) // diverge
			}
		}
		c.arr = append(c.arr, arrival{at, &Request{ID: i, Prompt: prompt, Output: rng.IntN(3 * c.bs), Blocks: bl}})
	}
	return c
}

func (c stressCase) engine() *Engine {
	spec := Spec{Name: "stress", MaxNumBatchedTokens: c.budget, MaxNumSeqs: c.seqs, Step: StepModel{Fixed: 1, PerToken: 0.01, PerAttnPair: 1e-4, PerKVToken: 1e-3, PerDecode: 0.01}}
	return NewEngine(spec, c.bs, c.blocks)
}

// checkStress replays c and checks conservation (every request finishes once or is rejected
// once, first token before finishing), that no block leaks (every block free and unreferenced
// at the end, the pool's invariants hold) and determinism (a second run gives the same events).
func checkStress(t *testing.T, c stressCase) {
	t.Helper()
	e := c.engine()
	evs := drive(t, e, c.arr)
	checkLives(t, c, evs, func(r *Request) bool {
		return r.Prompt >= 1 && ceilDiv(r.Prompt+max(1, r.Output), c.bs) <= c.blocks
	})
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.UsedBlocks != 0 || e.cache.nfree != c.blocks {
		t.Fatalf("not drained: %+v, %d of %d blocks free", st, e.cache.nfree, c.blocks)
	}
	checkCache(t, e)
	if again := drive(t, c.engine(), c.arr); !reflect.DeepEqual(evs, again) {
		t.Fatal("same workload, different events")
	}
}

// checkLives checks conservation over evs, the events of replaying c: a request that fits (by
// the engine's own admission rule) is scheduled once, gets its first token once, before it
// finishes, and finishes once; one that does not fit is rejected once and nothing else.
func checkLives(t *testing.T, c stressCase, evs []timed, fits func(*Request) bool) {
	t.Helper()
	type life struct{ sched, first, fin, rej int }
	lives := make([]life, len(c.arr))
	for _, ev := range evs {
		if ev.Req < 0 {
			continue
		}
		l := &lives[ev.Req]
		switch ev.Kind {
		case Scheduled:
			l.sched++
		case FirstToken:
			if l.fin > 0 {
				t.Fatalf("%+v: request %d first token after finishing", c, ev.Req)
			}
			l.first++
		case Finished:
			l.fin++
		case Rejected:
			l.rej++
		}
	}
	for id, l := range lives {
		r := c.arr[id].r
		switch ok := fits(r); {
		case !ok && (l.rej != 1 || l.fin+l.sched+l.first != 0):
			t.Fatalf("bs %d blocks %d: request %+v cannot fit but %+v", c.bs, c.blocks, *r, l)
		case ok && (l.fin != 1 || l.first != 1 || l.sched != 1 || l.rej != 0):
			t.Fatalf("bs %d blocks %d budget %d seqs %d: request %+v: %+v", c.bs, c.blocks, c.budget, c.seqs, *r, l)
		}
	}
}

func TestStressConservation(t *testing.T) {
	preempted := 0
	for seed := range uint64(400) {
		c := newStressCase(seed)
		checkStress(t, c)
		preempted += c.engineAfter(t).Stats().Preemptions
	}
	if preempted == 0 {
		t.Fatal("no random case preempted: the stress test does not reach preemption")
	}
}

// engineAfter replays c and returns the drained engine.
func (c stressCase) engineAfter(t *testing.T) *Engine {
	e := c.engine()
	drive(t, e, c.arr)
	return e
}

func FuzzEngineConservation(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkStress(t, newStressCase(seed)) })
}
