package mockworker

import (
	"context"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// TestSGLangPresetTiming: with an SGLang-style preset a rank is the fleet's SGLang engine: a
// lone request's TTFT is its prefill batches chunked at chunked_prefill_size and timed by the
// roofline's prefill formula, each further token a decode batch, and a repeat finds its full
// pages in the radix tree (stored by KV events the index can follow).
func TestSGLangPresetTiming(t *testing.T) {
	const bs = 16
	w := newWorker(t, Config{BlockSize: bs, NumGPUBlocks: 4000, Model: fleet.PresetSGLangH100_8B, Clock: NewInstantClock(epoch0)})
	spec, _ := fleet.Preset(fleet.PresetSGLangH100_8B)
	m, chunk := spec.SGLang.Cost, spec.SGLang.ChunkedPrefillSize
	prefill := func(cached, n int) float64 {
		total := 0.0
		for n > 0 {
			c := min(n, chunk)
			total += m.PrefillMS(c, float64(c)*float64(cached)+float64(c)*float64(c+1)/2)
			cached, n = cached+c, n-c
		}
		return total
	}
	p := tokens(1, 20000)
	cold, err := w.Serve(context.Background(), Request{PromptTokenIDs: p[:10000], MaxTokens: intp(3)})
	if err != nil {
		t.Fatal(err)
	}
	if want := prefill(0, 10000); !near(cold.TTFTMS, want) || cold.QueueMS != 0 {
		t.Fatalf("cold %+v, want ttft %.4f", cold, want)
	}
	g := spec.SGLang.CUDAGraphMaxBS
	if want := m.DecodeMS(1, 10000, g) + m.DecodeMS(1, 10001, g); !near(cold.E2EMS-cold.TTFTMS, want) {
		t.Fatalf("decode %.4f, want %.4f", cold.E2EMS-cold.TTFTMS, want)
	}
	warm, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, MaxTokens: intp(0)})
	if err != nil {
		t.Fatal(err)
	}
	const cached = 10000 / bs * bs
	if want := prefill(cached, len(p)-cached); warm.CachedTokens != cached || !near(warm.TTFTMS, want) {
		t.Fatalf("warm %+v, want cached %d ttft %.4f", warm, cached, want)
	}
	st := w.Stats()[0]
	if st.PinnedBlocks != 0 || st.CachedBlocks != 20000/bs || st.Requests != 2 || st.StoredBlocks != 20000/bs {
		t.Fatalf("stats %+v", st)
	}
}
