package fleet

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// testSpec is a tiny engine: 10-token blocks, a 100-token budget, unit step costs so that a
// step's duration is easy to predict.
func testSpec(seqs int) Spec {
	return Spec{Name: "test", MaxNumBatchedTokens: 100, MaxNumSeqs: seqs, Step: StepModel{Fixed: 1, PerToken: 0.01}}
}

func ids(base uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

type timed struct {
	at float64
	Event
}

type arrival struct {
	at float64
	r  *Request
}

// drive replays arrivals through w and returns every event with its time.
func drive(t testing.TB, w Worker, arrivals []arrival) []timed {
	t.Helper()
	var out []timed
	var buf []Event
	i := 0
	for steps := 0; ; steps++ {
		if steps > 1_000_000 {
			t.Fatal("engine does not terminate")
		}
		next := w.NextAt()
		if i < len(arrivals) && arrivals[i].at <= next {
			buf = w.Submit(arrivals[i].at, arrivals[i].r, buf[:0])
			for _, e := range buf {
				out = append(out, timed{arrivals[i].at, e})
			}
			i++
			continue
		}
		if next == inf {
			return out
		}
		buf = w.Advance(buf[:0])
		for _, e := range buf {
			out = append(out, timed{next, e})
		}
	}
}

func TestStepCompositionUnderBudget(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 1000)
	a := &Request{ID: 1, Prompt: 250, Output: 3, Blocks: ids(100, 25)}
	b := &Request{ID: 2, Prompt: 30, Output: 2, Blocks: ids(200, 3)}
	e.Submit(0, a, nil)
	e.Submit(0, b, nil) // joins at the next step
	type part struct{ id, n int }
	var steps [][]part
	for e.NextAt() != inf {
		var p []part
		for _, sc := range e.sched {
			p = append(p, part{sc.s.r.ID, sc.n})
		}
		steps = append(steps, p)
		e.Advance(nil)
	}
	want := [][]part{
		{{1, 100}},         // A alone (B arrived during the step)
		{{1, 100}},         // A's second chunk fills the budget: B waits
		{{1, 50}, {2, 30}}, // A's last chunk, then B's prompt
		{{1, 1}, {2, 1}},   // decodes
		{{1, 1}},           // B finished after 2 tokens
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	// A new prompt scheduled beside running decodes gets what the decodes leave.
	e2 := NewEngine(testSpec(16), 10, 1000)
	e2.Submit(0, &Request{ID: 1, Prompt: 10, Output: 5, Blocks: ids(1, 1)}, nil)
	e2.Advance(nil) // prompt done, first token
	e2.Submit(e2.now, &Request{ID: 2, Prompt: 500, Output: 1, Blocks: ids(50, 50)}, nil)
	e2.Advance(nil)
	if len(e2.sched) != 2 || e2.sched[0].n != 1 || e2.sched[1].n != 99 {
		t.Fatalf("decode-first composition: %+v", e2.sched)
	}
}

func TestChunkedPrefillTiming(t *testing.T) {
	spec := testSpec(16)
	spec.Step.PerAttnPair = 1e-4
	e := NewEngine(spec, 10, 1000)
	evs := drive(t, e, []arrival{{0, &Request{ID: 7, Prompt: 250, Output: 1, Blocks: ids(1, 25)}}})
	var first float64 = -1
	for _, ev := range evs {
		if ev.Kind == FirstToken {
			first = ev.at
		}
	}
	want := spec.Step.PrefillMS(0, 250, 100) // three chunks: 100, 100, 50
	chunks := spec.Step.StepMS(100, attnPairs(0, 100), 0, 0) + spec.Step.StepMS(100, attnPairs(100, 100), 0, 0) + spec.Step.StepMS(50, attnPairs(200, 50), 0, 0)
	if first != want || want != chunks {
		t.Fatalf("first token at %v, want %v (= %v)", first, want, chunks)
	}
}

func TestPrefixHitAndLRUKeepsPinnedBlocks(t *testing.T) {
	// 10 blocks of 10 tokens. X (3 full blocks + 1 token) finishes: it frees its blocks tail
	// first, so the free queue is b4..b9, b3 (X's partial block), 12, 11, 10. Y pins 4 blocks
	// (b4..b7) while it decodes. Z, arriving meanwhile, needs 5: b8, b9, b3, then 12 and 11
	// are evicted — X's deepest first, never Y's.
	e := NewEngine(testSpec(16), 10, 10)
	x := &Request{ID: 1, Prompt: 31, Output: 1, Blocks: ids(10, 4)}
	y := &Request{ID: 2, Prompt: 30, Output: 5, Blocks: ids(20, 3)}
	z := &Request{ID: 3, Prompt: 41, Output: 1, Blocks: ids(30, 5)}
	evs := drive(t, e, []arrival{{0, x}, {100, y}, {102, z}})
	var removed []uint64
	var stored [][]uint64
	for _, ev := range evs {
		switch ev.Kind {
		case Removed:
			removed = append(removed, ev.Blocks...)
		case Stored:
			stored = append(stored, ev.Blocks)
		}
	}
	if !reflect.DeepEqual(stored[0], []uint64{10, 11, 12}) {
		t.Fatalf("X stored %v: only full blocks are cached", stored[0])
	}
	if !slices.Equal(removed, []uint64{12, 11}) {
		t.Fatalf("removed %v, want X's blocks deepest first", removed)
	}
	// A repeat of Y's prompt hits its blocks, capped one token short of the prompt.
	if got := e.CachedPrefix(y.Blocks, y.Prompt); got != 20 {
		t.Fatalf("cached prefix %d tokens, want 20 (30-token prompt, hit capped at 29)", got)
	}
	checkCache(t, e)
}

func TestPrefixHitIsLeadingRun(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 100)
	drive(t, e, []arrival{{0, &Request{ID: 1, Prompt: 40, Output: 1, Blocks: []uint64{1, 2, 3, 4}}}})
	// Same ids after a different first block chain to different keys: no hit.
	if got := e.CachedPrefix([]uint64{9, 2, 3, 4}, 41); got != 0 {
		t.Fatalf("hit %d after a different first block", got)
	}
	if got := e.CachedPrefix([]uint64{1, 2, 7, 4}, 41); got != 20 {
		t.Fatalf("hit %d, want the leading two blocks", got)
	}
	evs := drive(t, e, []arrival{{e.now + 1, &Request{ID: 2, Prompt: 45, Output: 1, Blocks: []uint64{1, 2, 3, 5, 6}}}})
	if evs[0].Kind != Scheduled || evs[0].CachedTokens != 30 {
		t.Fatalf("second request scheduled with %+v, want 30 cached tokens", evs[0].Event)
	}
}

func TestPreemptionNewestFirst(t *testing.T) {
	// 6 blocks of 10 tokens. A and B each need 2 blocks for their prompt and grow by a block
	// every 10 decode tokens: the cache runs out and B, the newest, is preempted, recomputes
	// later and still finishes.
	e := NewEngine(testSpec(16), 10, 6)
	a := &Request{ID: 1, Prompt: 15, Output: 30, Blocks: ids(10, 2)}
	b := &Request{ID: 2, Prompt: 15, Output: 30, Blocks: ids(20, 2)}
	evs := drive(t, e, []arrival{{0, a}, {0, b}})
	var preempted []int
	finished := map[int]int{}
	for _, ev := range evs {
		switch ev.Kind {
		case Preempted:
			preempted = append(preempted, ev.Req)
		case Finished:
			finished[ev.Req]++
		}
	}
	if len(preempted) == 0 || preempted[0] != 2 {
		t.Fatalf("preempted %v, want B (the newest) first", preempted)
	}
	if finished[1] != 1 || finished[2] != 1 || e.Stats().Preemptions != len(preempted) {
		t.Fatalf("finished %v, preemptions %d", finished, e.Stats().Preemptions)
	}
	checkCache(t, e)
}

func TestRejectsWhatCannotFit(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 4)
	evs := e.Submit(0, &Request{ID: 9, Prompt: 35, Output: 10, Blocks: ids(1, 4)}, nil)
	if len(evs) != 1 || evs[0].Kind != Rejected || e.NextAt() != inf {
		t.Fatalf("events %+v", evs)
	}
}

func TestMaxNumSeqs(t *testing.T) {
	e := NewEngine(testSpec(2), 10, 1000)
	for i := range 4 {
		e.Submit(0, &Request{ID: i, Prompt: 5, Output: 10, Blocks: nil}, nil)
	}
	e.Advance(nil)
	if st := e.Stats(); st.Running != 2 || st.Waiting != 2 {
		t.Fatalf("stats %+v, want 2 running and 2 waiting", st)
	}
}

// randomArrivals is a workload with shared prefixes that overloads a small cache.
func randomArrivals(seed uint64, n int) []arrival {
	rng := rand.New(rand.NewPCG(seed, 9))
	var out []arrival
	at := 0.0
	for i := range n {
		prefix := uint64(rng.IntN(4)) << 32
		nb := 1 + rng.IntN(12)
		bl := make([]uint64, nb)
		for j := range bl {
			if j < 3 {
				bl[j] = prefix | uint64(j)
			} else {
				bl[j] = uint64(i)<<16 | uint64(j)
			}
		}
		at += rng.Float64() * 3
		out = append(out, arrival{at, &Request{ID: i, Prompt: nb*10 - rng.IntN(10), Output: 1 + rng.IntN(40), Blocks: bl}})
	}
	return out
}

func TestConservationAndDeterminism(t *testing.T) {
	for _, name := range []string{"vllm", "legacy"} {
		mk := func() Worker {
			if name == "legacy" {
				return newLegacy(10, 30)
			}
			return NewEngine(testSpec(8), 10, 30)
		}
		for seed := range uint64(5) {
			arr := randomArrivals(seed, 300)
			w := mk()
			evs := drive(t, w, arr)
			counts := map[EventKind]map[int]int{}
			for _, ev := range evs {
				if counts[ev.Kind] == nil {
					counts[ev.Kind] = map[int]int{}
				}
				counts[ev.Kind][ev.Req]++
			}
			for _, a := range arr {
				id := a.r.ID
				done := counts[Finished][id] + counts[Rejected][id]
				if done != 1 || counts[Scheduled][id] > 1 || counts[FirstToken][id] != counts[Finished][id] {
					t.Fatalf("%s seed %d: request %d: finished %d rejected %d scheduled %d first %d", name, seed, id,
						counts[Finished][id], counts[Rejected][id], counts[Scheduled][id], counts[FirstToken][id])
				}
			}
			if st := w.Stats(); st.Running != 0 || st.Waiting != 0 || st.UsedBlocks != 0 {
				t.Fatalf("%s seed %d: engine not drained: %+v", name, seed, st)
			}
			if e, ok := w.(*Engine); ok {
				checkCache(t, e)
			}
			if again := drive(t, mk(), randomArrivals(seed, 300)); !reflect.DeepEqual(evs, again) {
				t.Fatalf("%s seed %d: two runs differ", name, seed)
			}
		}
	}
}

// checkCache verifies the block pool's invariants: the free queue holds exactly the
// unreferenced blocks, every cached key chains committed blocks only, and ncached counts them.
func checkCache(t *testing.T, e *Engine) {
	t.Helper()
	c := e.cache
	n := 0
	for b := c.head.next; b != &c.head; b = b.next {
		if b.refs != 0 {
			t.Fatalf("pinned block %d on the free queue", b.id)
		}
		n++
	}
	if n != c.nfree {
		t.Fatalf("free count %d, queue %d", c.nfree, n)
	}
	free, held, committed := 0, 0, 0
	for i := range c.blocks {
		b := &c.blocks[i]
		switch {
		case b.refs < 0:
			t.Fatalf("block %d has %d refs", i, b.refs)
		case b.refs == 0:
			free++
			if b.prev == nil {
				t.Fatalf("free block %d not on the free queue", i)
			}
		default:
			held++
		}
		if b.committed {
			committed++
		}
	}
	if free != c.nfree || free+held != c.numBlocks {
		t.Fatalf("free %d (counted %d) + held %d != %d blocks", free, c.nfree, held, c.numBlocks)
	}
	chained := 0
	for k, b := range c.entries {
		for ; b != nil; b = b.dup {
			if !b.committed || b.key != k {
				t.Fatalf("entry %x chains block %d (committed %v key %x)", k, b.id, b.committed, b.key)
			}
			chained++
		}
	}
	if chained != committed || committed != c.ncached {
		t.Fatalf("committed %d, chained %d, ncached %d", committed, chained, c.ncached)
	}
}

func TestPresets(t *testing.T) {
	for _, p := range slices.Concat(Presets(), VariantPresets()) {
		got, err := Preset(p.Name)
		if err != nil || got.Name != p.Name || p.MaxNumBatchedTokens < 1 || p.NumBlocks(512) < 100 {
			t.Fatalf("preset %q: %+v %v", p.Name, got, err)
		}
		if !p.Legacy && p.SGLang == nil {
			// An 8K prefill takes between 0.1 and 1.5 s (a 70B model on eight A100s the
			// longest); a decode step between 4 and 20 ms.
			if ms := p.Step.PrefillMS(0, 8192, p.MaxNumBatchedTokens); ms < 100 || ms > 1500 {
				t.Fatalf("%s: 8K prefill %v ms", p.Name, ms)
			}
			if ms := p.Step.DecodeStepMS(4096); ms < 4 || ms > 20 {
				t.Fatalf("%s: decode step %v ms", p.Name, ms)
			}
		}
	}
	// The A100 preset: vLLM's A100 batch defaults, and a GPU about three times slower than the
	// H100 at prefill (312 against 989 TFLOP/s) whose decode steps read weights 1.6 times
	// slower (2.039 against 3.35 TB/s).
	a, _ := Preset(PresetA100_8B)
	h, _ := Preset(PresetH100_8B)
	if a.Name != PresetA100_8B || a.MaxNumBatchedTokens != 2048 || a.MaxNumSeqs != 256 || a.NumBlocks(512) != h.NumBlocks(512) {
		t.Fatalf("a100 preset: %+v", a)
	}
	if r := a.Step.PrefillMS(0, 8192, a.MaxNumBatchedTokens) / h.Step.PrefillMS(0, 8192, h.MaxNumBatchedTokens); r < 2.5 || r > 4 {
		t.Fatalf("a100/h100 8K prefill %.2f×", r)
	}
	if r := a.Step.DecodeStepMS(4096) / h.Step.DecodeStepMS(4096); r < 1.4 || r > 1.8 {
		t.Fatalf("a100/h100 decode step %.2f×", r)
	}
	// Its 70B counterpart against the H100 TP8 preset: the same batch defaults and KV capacity
	// as the A100 and the H100 preset respectively, the same prefill ratio.
	a70, _ := Preset(PresetA100x8_70B)
	h70, _ := Preset(PresetH100x870)
	if a70.MaxNumBatchedTokens != 2048 || a70.MaxNumSeqs != 256 || a70.NumBlocks(512) != h70.NumBlocks(512) {
		t.Fatalf("a100x8-70b preset: %+v", a70)
	}
	if r := a70.Step.PrefillMS(0, 8192, a70.MaxNumBatchedTokens) / h70.Step.PrefillMS(0, 8192, h70.MaxNumBatchedTokens); r < 2.5 || r > 4 {
		t.Fatalf("a100x8/h100x8 70B 8K prefill %.2f×", r)
	}
	if _, err := Preset("nope"); err == nil {
		t.Fatal("unknown preset accepted")
	}
	if d, _ := Preset(""); d.Name != DefaultPreset {
		t.Fatal("empty name is not the default preset")
	}
}

func TestAbortAndReset(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 40)
	a := &Request{ID: 1, Prompt: 250, Output: 5, Blocks: ids(100, 25)}
	b := &Request{ID: 2, Prompt: 30, Output: 5, Blocks: ids(200, 3)}
	e.Submit(0, a, nil)
	e.Submit(0, b, nil)
	e.Advance(nil) // a's first chunk: 10 blocks committed; b waits
	if e.ResetPrefixCache() {
		t.Fatal("reset accepted while a holds blocks")
	}
	if !e.Abort(2) || e.Stats().Waiting != 0 {
		t.Fatal("abort of a waiting request")
	}
	e.Advance(nil) // a's second chunk is running now
	if !e.Abort(1) || e.Abort(1) {
		t.Fatal("abort of a running request, then of an unknown one")
	}
	st := e.Stats()
	// a's blocks were committed as each chunk was scheduled (25 with the running third one)
	// and stay cached, unreferenced, as in vLLM.
	if st.Running != 0 || st.UsedBlocks != 0 || st.CachedBlocks != 25 {
		t.Fatalf("after aborts: %+v (a's 25 committed blocks stay cached, unreferenced)", st)
	}
	evs := e.Advance(nil) // the in-flight step ends: only its KV events name a
	for _, ev := range evs {
		if ev.Req == 1 && ev.Kind != Stored {
			t.Fatalf("aborted request reported %+v", ev)
		}
	}
	checkCache(t, e)
	if !e.ResetPrefixCache() || e.Stats().CachedBlocks != 0 || e.CachedPrefix(a.Blocks, a.Prompt) != 0 {
		t.Fatal("reset of an idle engine")
	}
	checkCache(t, e)
}
