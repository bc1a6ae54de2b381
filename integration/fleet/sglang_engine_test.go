package fleet

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// sglTestSpec is a tiny SGLang-style engine: 100-token chunks, a 200-token prefill budget,
// unit costs (prefill 1 + 0.01/token ms, decode 1 + 0.01/request ms).
func sglTestSpec(running int) Spec {
	p := sglangDefaults(1<<20, Roofline{FLOPTokenMS: 0.01, PrefillOverhead: 1, GraphLaunch: 1})
	p.ChunkedPrefillSize, p.MaxPrefillTokens, p.MaxRunningRequests, p.LPMQueueLimit, p.RetractDecodeSteps = 100, 200, running, 4, 2
	return Spec{Name: "sgl-test", SGLang: p, MaxNumBatchedTokens: 100, MaxNumSeqs: running}
}

type sglPart struct {
	id, n  int
	decode bool
}

// sglSteps runs e to idle and returns each step's composition.
func sglSteps(e *SGLang, between func(step int)) [][]sglPart {
	var steps [][]sglPart
	for e.NextAt() != inf {
		var p []sglPart
		for _, sc := range e.batch {
			p = append(p, sglPart{sc.s.r.ID, sc.n, e.decode})
		}
		steps = append(steps, p)
		if between != nil {
			between(len(steps))
		}
		e.Advance(nil)
	}
	return steps
}

func TestSGLangPrefillAndDecodeNeverMix(t *testing.T) {
	e := NewSGLang(sglTestSpec(16), 10, 1000)
	a := &Request{ID: 1, Prompt: 250, Output: 3, Blocks: ids(100, 25)}
	b := &Request{ID: 2, Prompt: 30, Output: 2, Blocks: ids(200, 3)}
	e.Submit(0, a, nil)
	steps := sglSteps(e, func(step int) {
		if step == 4 {
			e.Submit(e.now, b, nil) // arrives while A decodes
		}
	})
	want := [][]sglPart{
		{{1, 100, false}}, // chunk 1: the chunk budget caps the batch
		{{1, 100, false}}, // chunk 2
		{{1, 50, false}},  // last chunk, first token
		{{1, 1, true}},    // A decodes
		{{2, 30, false}},  // B's prefill runs alone: A's decode waits (prefill first)
		{{1, 1, true}, {2, 1, true}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps\n%v\nwant\n%v", steps, want)
	}
}

func TestSGLangChunkBudgetSharedWithinPrefill(t *testing.T) {
	e := NewSGLang(sglTestSpec(16), 10, 1000)
	e.Submit(0, &Request{ID: 1, Prompt: 150, Output: 1, Blocks: ids(100, 15)}, nil)
	e.Submit(0, &Request{ID: 2, Prompt: 80, Output: 1, Blocks: ids(200, 8)}, nil)
	e.Submit(0, &Request{ID: 3, Prompt: 120, Output: 1, Blocks: ids(300, 12)}, nil)
	steps := sglSteps(e, nil)
	want := [][]sglPart{
		{{1, 100, false}},                // A chunked: the chunk budget is spent
		{{1, 50, false}, {2, 50, false}}, // A's last chunk; B takes the rest, chunked
		{{2, 30, false}, {3, 70, false}}, // B finishes; C is the one mid-chunk now
		{{3, 50, false}},                 // C's last chunk
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps\n%v\nwant\n%v", steps, want)
	}
}

func TestSGLangLongestPrefixFirst(t *testing.T) {
	e := NewSGLang(sglTestSpec(16), 10, 1000)
	shared := ids(100, 9)
	e.Submit(0, &Request{ID: 1, Prompt: 90, Output: 1, Blocks: shared}, nil)
	for e.NextAt() != inf {
		e.Advance(nil)
	}
	// Three arrive while a long prompt occupies the engine: C (cold, first), D (hits A's 8 pages
	// of 9: one token is always computed), F (cold). Budget: 100 tokens per batch.
	e.Submit(e.now, &Request{ID: 9, Prompt: 100, Output: 1, Blocks: ids(900, 10)}, nil)
	e.Submit(e.now, &Request{ID: 2, Prompt: 95, Output: 1, Blocks: ids(300, 9)}, nil)
	e.Submit(e.now, &Request{ID: 3, Prompt: 95, Output: 1, Blocks: append(slices.Clone(shared), 555)}, nil)
	var scheduled []int
	var cached []int
	for e.NextAt() != inf {
		for _, ev := range e.Advance(nil) {
			if ev.Kind == Scheduled {
				scheduled = append(scheduled, ev.Req)
				cached = append(cached, ev.CachedTokens)
			}
		}
	}
	if !reflect.DeepEqual(scheduled, []int{3, 2}) || cached[0] != 90 {
		t.Fatalf("admitted %v cached %v, want D (longest prefix) before C, D with 90 cached", scheduled, cached)
	}
}

func TestSGLangFCFSWhenQueueIsLong(t *testing.T) {
	e := NewSGLang(sglTestSpec(1), 10, 1000) // one running request at a time
	shared := ids(100, 5)
	e.Submit(0, &Request{ID: 0, Prompt: 50, Output: 1, Blocks: shared}, nil)
	for e.NextAt() != inf {
		e.Advance(nil)
	}
	e.Submit(e.now, &Request{ID: 99, Prompt: 10, Output: 50, Blocks: ids(990, 1)}, nil) // occupies the engine
	for i := 1; i <= 5; i++ {                                                           // 5 waiting > LPMQueueLimit 4
		e.Submit(e.now, &Request{ID: i, Prompt: 60, Output: 1, Blocks: ids(uint64(1000*i), 6)}, nil)
	}
	e.Submit(e.now, &Request{ID: 6, Prompt: 60, Output: 1, Blocks: append(slices.Clone(shared), 7)}, nil)
	var order []int
	for e.NextAt() != inf {
		for _, ev := range e.Advance(nil) {
			if ev.Kind == Scheduled {
				order = append(order, ev.Req)
			}
		}
	}
	// While six wait (over the limit) the queue is served in arrival order; once four are left
	// lpm ranks the hit (6) first.
	if want := []int{1, 2, 6, 3, 4, 5}; !reflect.DeepEqual(order, want) {
		t.Fatalf("admission order %v, want %v", order, want)
	}
}

func TestSGLangLRUSparesLockedPages(t *testing.T) {
	c := newRadixCache(10, 100) // ten pages
	c.clock = 0
	chain := func(base uint64, n int) []*rnode {
		var out []*rnode
		var parent *rnode
		k := uint64(rootKey)
		for i := range n {
			k = chainKey(k, base+uint64(i))
			if !c.alloc(10) {
				t.Fatal("alloc failed")
			}
			nd, _ := c.insert(parent, k, base+uint64(i))
			out, parent = append(out, nd), nd
		}
		return out
	}
	old := chain(100, 3)  // oldest
	held := chain(200, 3) // stays locked
	young := chain(300, 3)
	for _, n := range append(append(slices.Clone(old), young...), held[2]) {
		c.unlock(n) // held's first two pages stay locked, its leaf too... unlock only the leaf
	}
	// held: pages 0 and 1 still locked; the leaf is unlocked but the lock of its ancestors
	// does not protect it. old, young: fully unlocked.
	if c.evictable != 70 || c.free() != 10 {
		t.Fatalf("evictable %d free %d", c.evictable, c.free())
	}
	if !c.alloc(50) { // 40 to evict
		t.Fatal("alloc failed")
	}
	got := c.takeEvicted()
	// LRU leaves first: old's chain (leaf up), then held's unlocked leaf (older than young).
	if want := []uint64{102, 101, 100, 202}; !reflect.DeepEqual(got, want) {
		t.Fatalf("evicted %v, want %v", got, want)
	}
	if c.alloc(40) { // only young's 30 tokens are evictable
		t.Fatal("allocated over locked pages")
	}
	if len(c.nodes) != 2 || c.evictable != 0 {
		t.Fatalf("after evicting all it could, %d pages (%d evictable tokens) remain, want held's two locked ones", len(c.nodes), c.evictable)
	}
	for _, n := range held[:2] {
		if _, ok := c.nodes[n.key]; !ok || n.refs != 1 {
			t.Fatal("a locked page was evicted")
		}
	}
}

func TestSGLangRetraction(t *testing.T) {
	// A 300-token pool; four requests of 60 prompt tokens each want 40 output tokens. With a
	// low new_token_ratio admission expects little more output from running requests, so all
	// four are admitted, and they cannot all finish together (4 × 100 > 300).
	spec := sglTestSpec(16)
	spec.SGLang.InitNewTokenRatio, spec.SGLang.MinNewTokenRatio = 0.1, 0.05
	e := NewSGLang(spec, 10, 30)
	var arr []arrival
	for i := range 4 {
		arr = append(arr, arrival{0, &Request{ID: i, Prompt: 60 + i, Output: 40, Blocks: ids(uint64(100*i+100), 6)}})
	}
	evs := drive(t, e, arr)
	var retracted []int
	finished := map[int]int{}
	for _, ev := range evs {
		switch ev.Kind {
		case Preempted:
			retracted = append(retracted, ev.Req)
		case Finished:
			finished[ev.Req]++
		}
	}
	if len(retracted) == 0 {
		t.Fatal("no retraction under a pool that cannot hold every output")
	}
	// The last admitted (3, also the longest prompt) has generated the fewest tokens.
	if retracted[0] != 3 {
		t.Fatalf("first retracted %d, want 3 (fewest outputs, longest prompt)", retracted[0])
	}
	if len(finished) != 4 {
		t.Fatalf("finished %v", finished)
	}
	if e.ratio <= e.p.MinNewTokenRatio {
		t.Fatalf("new_token_ratio %v was not raised by the retraction", e.ratio)
	}
	checkSGLangIdle(t, e)
}

// checkSGLangIdle asserts an idle engine holds no request memory and no locks.
func checkSGLangIdle(t *testing.T, e *SGLang) {
	t.Helper()
	c := e.cache
	if c.private != 0 || c.evictable != c.treeTokens() || c.free()+c.treeTokens() != c.poolTokens {
		t.Fatalf("idle engine: private %d evictable %d tree %d free %d", c.private, c.evictable, c.treeTokens(), c.free())
	}
	for _, n := range c.nodes {
		if n.refs != 0 {
			t.Fatal("a page stays locked after every request finished")
		}
	}
}

func sglRandomArrivals(seed uint64, n int) []arrival {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []arrival
	at := 0.0
	for i := range n {
		at += rng.Float64() * 3
		prompt := 1 + rng.IntN(400)
		blocks := make([]uint64, ceilDiv(prompt, 10))
		prefix := uint64(rng.IntN(4)) // a few shared prefixes
		for j := range blocks {
			if j < 3 {
				blocks[j] = prefix*1000 + uint64(j)
			} else {
				blocks[j] = uint64(i)*1000 + uint64(j) + 10_000
			}
		}
		out = append(out, arrival{at, &Request{ID: i, Prompt: prompt, Output: 1 + rng.IntN(60), Blocks: blocks}})
	}
	return out
}

func TestSGLangConservationAndEvents(t *testing.T) {
	retracts, removed := 0, 0
	for seed := range uint64(6) {
		e := NewSGLang(sglTestSpec(8), 10, 60+int(seed)*20)
		arr := sglRandomArrivals(seed, 300)
		evs := drive(t, e, arr)
		done := map[int]int{}
		first := map[int]int{}
		sched := map[int]int{}
		index := map[uint64]bool{} // what a KV index following the events holds
		for _, ev := range evs {
			switch ev.Kind {
			case Finished, Rejected:
				done[ev.Req]++
			case FirstToken:
				first[ev.Req]++
			case Scheduled:
				sched[ev.Req]++
			case Stored:
				if ev.HasParent != (ev.First > 0) || (ev.HasParent && !index[ev.Parent]) {
					t.Fatalf("seed %d: stored run without its parent cached: %+v", seed, ev.Event)
				}
				for _, id := range ev.Blocks {
					index[id] = true
				}
			case Removed:
				removed++
				for _, id := range ev.Blocks {
					if !index[id] {
						t.Fatalf("seed %d: removed %d, never stored", seed, id)
					}
					delete(index, id)
				}
			}
		}
		for _, a := range arr {
			id := a.r.ID
			if done[id] != 1 || (sched[id] == 1) != (first[id] == 1) || sched[id] > 1 {
				t.Fatalf("seed %d req %d: done %d scheduled %d first %d", seed, id, done[id], sched[id], first[id])
			}
		}
		cached := map[uint64]bool{}
		for _, n := range e.cache.nodes {
			cached[n.id] = true
		}
		if !reflect.DeepEqual(index, cached) {
			t.Fatalf("seed %d: the event stream's index (%d) differs from the tree (%d)", seed, len(index), len(cached))
		}
		checkSGLangIdle(t, e)
		retracts += e.retracts
	}
	if retracts == 0 || removed == 0 {
		t.Fatalf("the workloads never retracted (%d) or evicted (%d): they test too little", retracts, removed)
	}
}

func TestSGLangDeterministicPerSeed(t *testing.T) {
	run := func(seed uint64) []timed {
		return drive(t, NewSGLang(sglTestSpec(8), 10, 80), sglRandomArrivals(seed, 200))
	}
	a, b, c := run(3), run(3), run(4)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of one seed differ")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("two seeds give the same run: the workload does not matter?")
	}
}

func TestSGLangAbortAndReset(t *testing.T) {
	e := NewSGLang(sglTestSpec(8), 10, 100)
	e.Submit(0, &Request{ID: 1, Prompt: 250, Output: 5, Blocks: ids(100, 25)}, nil)
	e.Submit(0, &Request{ID: 2, Prompt: 50, Output: 5, Blocks: ids(300, 5)}, nil)
	e.Advance(nil) // A's first chunk is cached
	if e.ResetPrefixCache() {
		t.Fatal("flushed the cache while requests run")
	}
	if !e.Abort(1) || !e.Abort(2) || e.Abort(3) {
		t.Fatal("abort")
	}
	for e.NextAt() != inf {
		e.Advance(nil)
	}
	checkSGLangIdle(t, e)
	if len(e.cache.nodes) != 10 || !e.ResetPrefixCache() || len(e.cache.nodes) != 0 {
		t.Fatal("the aborted request's cached chunk should stay until the cache is flushed")
	}
}

func TestSGLangPresets(t *testing.T) {
	for _, name := range []string{PresetSGLangH100_8B, PresetSGLangH100x870} {
		sp, err := Preset(name)
		if err != nil || sp.SGLang == nil || slices.Contains(PresetNames(), name) || !slices.Contains(AllPresetNames(), name) {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := New(sp, 512, 0).(*SGLang); !ok {
			t.Fatalf("%s: New does not build the SGLang-style engine", name)
		}
	}
	sp, _ := Preset(PresetSGLangH100_8B)
	// The FCFS variant (variant_presets.go) is the same engine in arrival order.
	fcfs, err := Preset(PresetSGLangFCFS_8B)
	if err != nil || fcfs.SGLang == nil || fcfs.SGLang.LPM || !sp.SGLang.LPM {
		t.Fatalf("%s: %+v %v", PresetSGLangFCFS_8B, fcfs.SGLang, err)
	}
	if p := *fcfs.SGLang; p.LPM != sp.SGLang.LPM {
		p.LPM = sp.SGLang.LPM
		if p != *sp.SGLang || fcfs.KVTokens != sp.KVTokens {
			t.Fatalf("%s differs from %s beyond the schedule policy", PresetSGLangFCFS_8B, PresetSGLangH100_8B)
		}
	}
	m := sp.SGLang.Cost
	// An 8192-token prefill of the 8B model: ≈ 0.22 s of GEMMs (37 K tokens/s) plus attention.
	if ms := m.PrefillMS(8192, attnPairs(0, 8192)); ms < 200 || ms > 300 {
		t.Fatalf("8B 8192-token prefill %v ms", ms)
	}
	// A lone decode is memory-bound (≈ 5 ms of weights); 400 decodes turn compute-bound and
	// run eagerly (beyond the 256 captured batch sizes).
	if ms := m.DecodeMS(1, 1000, 256); ms < 4.8 || ms > 6 {
		t.Fatalf("8B lone decode %v ms", ms)
	}
	if a, b := m.DecodeMS(256, 256*1000, 256), m.DecodeMS(257, 257*1000, 256); b-a < 2 {
		t.Fatalf("eager launch beyond the graph sizes: %v → %v", a, b)
	}
	if tok := sp.KVTokens; tok < 400_000 || tok > 430_000 {
		t.Fatalf("8B KV pool %d tokens", tok)
	}
}
