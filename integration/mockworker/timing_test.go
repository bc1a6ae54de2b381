package mockworker

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kvselect/kvselect/integration/fleet"
	"github.com/kvselect/kvselect/internal/poll"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*max(1, math.Abs(b)) }

// TestTimingFormulas checks the reported model times against the documented formulas for
// cold, partly cached and fully cached prompts (instant clock, sequential requests).
func TestTimingFormulas(t *testing.T) {
	const bs = 16
	w := newWorker(t, Config{BlockSize: bs, NumGPUBlocks: 1000, Clock: NewInstantClock(epoch0)})
	p := tokens(1, 1000) // 62 full blocks + 8 tokens
	cases := []struct {
		name      string
		prompt    []uint32
		maxTokens int
		cached    int
	}{
		{"cold", p[:600], 10, 0},
		{"extends a cached prefix", p, 5, 37 * bs}, // 600 tokens = 37 full blocks
		{"fully cached but the partial block", p, 0, 62 * bs},
		{"single token", []uint32{42}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := w.Serve(context.Background(), Request{PromptTokenIDs: c.prompt, MaxTokens: intp(c.maxTokens)})
			if err != nil {
				t.Fatal(err)
			}
			ttft := fleet.LegacyPrefillMS(len(c.prompt) - c.cached)
			if r.CachedTokens != c.cached || !near(r.TTFTMS, ttft) || r.QueueMS != 0 {
				t.Fatalf("got %+v, want cached %d ttft %.4f", r, c.cached, ttft)
			}
			// While decoding, the request pins ceil-free full blocks of its prompt.
			u := float64(len(c.prompt)/bs) / 1000
			if e2e := ttft + float64(c.maxTokens)*fleet.LegacyITLMS(u); !near(r.E2EMS, e2e) {
				t.Fatalf("e2e %.4f, want %.4f", r.E2EMS, e2e)
			}
		})
	}
}

// TestPrefillQueueing: prefills on one rank run one at a time; the second of two concurrent
// requests waits for the first, and ranks do not queue behind each other. Driven by a manual
// clock, so the result is exact.
func TestPrefillQueueing(t *testing.T) {
	clk := NewManualClock(epoch0)
	w := newWorker(t, Config{BlockSize: 16, NumGPUBlocks: 100, DPSize: 2, Clock: clk})
	type out struct {
		r   Result
		err error
	}
	start := func(p []uint32, rank int) chan out {
		ch := make(chan out, 1)
		go func() {
			r, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, MaxTokens: intp(0), DPRank: intp(rank)})
			ch <- out{r, err}
		}()
		return ch
	}
	a := start(tokens(1, 300), 0)
	poll.True(t, poll.Generous, "first request sleeping", func() bool { return clk.Waiters() == 1 })
	b := start(tokens(5000, 100), 0)
	poll.True(t, poll.Generous, "second request sleeping", func() bool { return clk.Waiters() == 2 })
	c := start(tokens(9000, 100), 1)
	poll.True(t, poll.Generous, "third request sleeping", func() bool { return clk.Waiters() == 3 })
	clk.Advance(10 * time.Second)
	ra, rb, rc := <-a, <-b, <-c
	for _, o := range []out{ra, rb, rc} {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	pa, pb := fleet.LegacyPrefillMS(300), fleet.LegacyPrefillMS(100)
	if !near(ra.r.TTFTMS, pa) || ra.r.QueueMS != 0 {
		t.Fatalf("first: %+v, want ttft %.4f", ra.r, pa)
	}
	if !near(rb.r.QueueMS, pa) || !near(rb.r.TTFTMS, pa+pb) {
		t.Fatalf("second: %+v, want queue %.4f ttft %.4f", rb.r, pa, pa+pb)
	}
	if rc.r.QueueMS != 0 || !near(rc.r.TTFTMS, pb) {
		t.Fatalf("other rank: %+v, want no queueing", rc.r)
	}
}

// TestSpeedupScalesSleeps: with Speedup 10 a prefill of P model ms sleeps P/10 on the clock,
// while the reported TTFT stays P.
func TestSpeedupScalesSleeps(t *testing.T) {
	clk := NewManualClock(epoch0)
	w := newWorker(t, Config{BlockSize: 16, NumGPUBlocks: 100, Speedup: 10, Clock: clk})
	done := make(chan Result, 1)
	go func() {
		r, _ := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(1, 1000), MaxTokens: intp(0)})
		done <- r
	}()
	poll.True(t, poll.Generous, "request sleeping", func() bool { return clk.Waiters() == 1 })
	p := fleet.LegacyPrefillMS(1000)
	wall := time.Duration(p / 10 * float64(time.Millisecond))
	clk.Advance(wall - time.Microsecond)
	if clk.Waiters() != 1 {
		t.Fatal("woke before prefill/speedup had passed")
	}
	clk.Advance(2 * time.Microsecond)
	r := <-done
	if !near(r.TTFTMS, p) {
		t.Fatalf("ttft %.4f, want %.4f model ms", r.TTFTMS, p)
	}
}

// TestCancelReleasesBlocks: a request abandoned mid-prefill caches nothing and leaves no pins;
// one abandoned mid-decode keeps its (published) blocks cached but unpinned.
func TestCancelReleasesBlocks(t *testing.T) {
	clk := NewManualClock(epoch0)
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 100, Clock: clk})
	for _, phase := range []string{"prefill", "decode"} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		p := tokens(uint32(len(phase))*1000, 16)
		go func() {
			_, err := w.Serve(ctx, Request{PromptTokenIDs: p, MaxTokens: intp(100)})
			errc <- err
		}()
		poll.True(t, poll.Generous, "sleeping", func() bool { return clk.Waiters() == 1 })
		if phase == "decode" {
			clk.Advance(time.Second)
			poll.True(t, poll.Generous, "decoding", func() bool { return clk.Waiters() == 1 && w.Stats()[0].PinnedBlocks == 4 })
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v, want context.Canceled", phase, err)
		}
		st := w.Stats()[0]
		wantCached := map[string]int{"prefill": 0, "decode": 4}[phase]
		if st.PinnedBlocks != 0 || st.Active != 0 || st.CachedBlocks != wantCached {
			t.Fatalf("%s: %+v, want %d cached, none pinned", phase, st, wantCached)
		}
	}
}

// TestServeRejectsBadRequests covers the Go API's validation.
func TestServeRejectsBadRequests(t *testing.T) {
	w := newWorker(t, Config{MaxPromptTokens: 10, Clock: NewInstantClock(epoch0)})
	for name, req := range map[string]Request{
		"empty prompt":        {},
		"too long":            {PromptTokenIDs: tokens(1, 11)},
		"negative max_tokens": {PromptTokenIDs: tokens(1, 3), MaxTokens: intp(-1)},
		"unknown rank":        {PromptTokenIDs: tokens(1, 3), DPRank: intp(1)},
	} {
		if _, err := w.Serve(context.Background(), req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", name, err)
		}
	}
	_ = w.Close()
	if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(1, 3)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestPresetTiming: with a realistic preset a rank is the fleet's vLLM-style engine: a lone
// request's TTFT is its chunked prefill under max_num_batched_tokens, each further token one
// decode step whose context grows by a token, and a repeat finds its full blocks cached.
func TestPresetTiming(t *testing.T) {
	const bs = 16
	w := newWorker(t, Config{BlockSize: bs, NumGPUBlocks: 4000, Model: fleet.PresetH100_8B, Clock: NewInstantClock(epoch0)})
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	p := tokens(1, 20000) // longer than one 8192-token chunk
	cold, err := w.Serve(context.Background(), Request{PromptTokenIDs: p[:10000], MaxTokens: intp(3)})
	if err != nil {
		t.Fatal(err)
	}
	if want := spec.Step.PrefillMS(0, 10000, spec.MaxNumBatchedTokens); !near(cold.TTFTMS, want) || cold.QueueMS != 0 {
		t.Fatalf("cold %+v, want ttft %.4f", cold, want)
	}
	// The prefill step samples token 1; two decode steps sample tokens 2 and 3.
	decode := spec.Step.DecodeStepMS(10000) + spec.Step.DecodeStepMS(10001)
	if !near(cold.E2EMS-cold.TTFTMS, decode) {
		t.Fatalf("decode %.4f, want %.4f", cold.E2EMS-cold.TTFTMS, decode)
	}
	warm, err := w.Serve(context.Background(), Request{PromptTokenIDs: p, MaxTokens: intp(0)})
	if err != nil {
		t.Fatal(err)
	}
	const cached = 10000 / bs * bs
	if want := spec.Step.PrefillMS(cached, len(p)-cached, spec.MaxNumBatchedTokens); warm.CachedTokens != cached || !near(warm.TTFTMS, want) || warm.E2EMS != warm.TTFTMS {
		t.Fatalf("warm %+v, want cached %d ttft %.4f", warm, cached, want)
	}
	st := w.Stats()[0]
	if st.PinnedBlocks != 0 || st.CachedBlocks != 20000/bs || st.Requests != 2 || st.StoredBlocks != 20000/bs {
		t.Fatalf("stats %+v", st)
	}
	if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(1, 4000*bs)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a prompt larger than the cache: %v, want ErrBadRequest", err)
	}
	if _, err := New(Config{Model: "tpu-9000"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("unknown model: %v, want ErrInvalidConfig", err)
	}
}

// TestPresetBatchesConcurrentRequests: a request arriving while another's prefill step runs
// joins the next step, which it shares with the first one's decode (continuous batching: one
// step computes b's prompt and a's second token); a request cancelled while waiting leaves
// nothing pinned.
func TestPresetBatchesConcurrentRequests(t *testing.T) {
	clk := NewManualClock(epoch0)
	w := newWorker(t, Config{BlockSize: 16, NumGPUBlocks: 1000, Model: fleet.PresetH100_8B, Clock: clk})
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	type out struct {
		r   Result
		err error
	}
	start := func(ctx context.Context, p []uint32, maxTokens int) chan out {
		ch := make(chan out, 1)
		go func() {
			r, err := w.Serve(ctx, Request{PromptTokenIDs: p, MaxTokens: intp(maxTokens)})
			ch <- out{r, err}
		}()
		return ch
	}
	a := start(context.Background(), tokens(1, 3000), 50)
	poll.True(t, poll.Generous, "first request sleeping", func() bool { return clk.Waiters() == 1 })
	// b arrives while a's step runs: it joins the next step.
	b := start(context.Background(), tokens(50000, 2000), 1)
	poll.True(t, poll.Generous, "second request sleeping", func() bool { return clk.Waiters() == 2 })
	ctx, cancel := context.WithCancel(context.Background())
	c := start(ctx, tokens(90000, 1000), 1)
	poll.True(t, poll.Generous, "third request sleeping", func() bool { return clk.Waiters() == 3 })
	cancel()
	if o := <-c; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cancelled request: %v", o.err)
	}
	clk.Advance(10 * time.Second)
	ra, rb := <-a, <-b
	if ra.err != nil || rb.err != nil {
		t.Fatal(ra.err, rb.err)
	}
	pa := spec.Step.PrefillMS(0, 3000, spec.MaxNumBatchedTokens)
	if !near(ra.r.TTFTMS, pa) {
		t.Fatalf("first: %+v, want ttft %.4f", ra.r, pa)
	}
	// b waited for a's step, then shared the next one with a's first decode.
	mixed := spec.Step.StepMS(1+2000, attnPairs(0, 2000), 3000, 1)
	if !near(rb.r.QueueMS, pa) || !near(rb.r.TTFTMS, pa+mixed) {
		t.Fatalf("second: %+v, want queue %.4f ttft %.4f", rb.r, pa, pa+mixed)
	}
	// a's 49 decode steps: the first shared with b's prompt, the rest alone.
	if ra.r.E2EMS <= ra.r.TTFTMS+mixed {
		t.Fatalf("first: e2e %.4f not past its shared step", ra.r.E2EMS)
	}
	if st := w.Stats()[0]; st.PinnedBlocks != 0 || st.Active != 0 {
		t.Fatalf("stats after all: %+v", st)
	}
}

// attnPairs is the fleet model's prefill attention pair count of a chunk of n tokens after k.
func attnPairs(k, n int) float64 { return float64(n)*float64(k) + float64(n)*float64(n+1)/2 }
