package fleet

import (
	"reflect"
	"testing"
)

// sglang builds the SGLang-style engine of c: the budget is its chunk size (and half its
// prefill budget, so that both limits bind), seqs its running-request bound.
func (c stressCase) sglang() *SGLang {
	spec := sglTestSpec(c.seqs)
	spec.SGLang.ChunkedPrefillSize, spec.SGLang.MaxPrefillTokens = c.budget, 2*c.budget
	return NewSGLang(spec, c.bs, c.blocks)
}

// checkSGLangStress replays c on the SGLang-style engine: every request that fits the pool
// finishes once after one Scheduled and one FirstToken, the others are rejected once; the
// drained engine holds no request memory or lock; a second run gives the same events.
func checkSGLangStress(t *testing.T, c stressCase) int {
	t.Helper()
	e := c.sglang()
	evs := drive(t, e, c.arr)
	checkLives(t, c, evs, func(r *Request) bool {
		return r.Prompt >= 1 && r.Prompt+max(1, r.Output) < c.blocks*c.bs
	})
	if st := e.Stats(); st.Running != 0 || st.Waiting != 0 || st.UsedBlocks != 0 {
		t.Fatalf("not drained: %+v", st)
	}
	checkSGLangIdle(t, e)
	if again := drive(t, c.sglang(), c.arr); !reflect.DeepEqual(evs, again) {
		t.Fatal("same workload, different events")
	}
	return e.retracts
}

func TestSGLangStressConservation(t *testing.T) {
	retracts := 0
	for seed := range uint64(400) {
		retracts += checkSGLangStress(t, newStressCase(seed))
	}
	if retracts == 0 {
		t.Fatal("no random case retracted: the stress test does not reach retraction")
	}
}

func FuzzSGLangConservation(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkSGLangStress(t, newStressCase(seed)) })
}
