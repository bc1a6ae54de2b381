package fleet

// Engine is the vLLM-style engine (see the package doc). Create it with New.
type Engine struct {
	spec    Spec
	bs      int
	cache   *kvCache
	running []*seq
	waiting []*seq // front is next; preempted requests return to the front
	sched   []scheduled
	busy    bool
	stepEnd float64
	now     float64
	preempt int
	hits    []*cblock // scratch for prefix lookups
	// pend holds the KV events of the running step's scheduling (blocks committed and evicted
	// when it was scheduled); like vLLM's update_from_output they are published when the
	// step's results are (Advance).
	pend []Event
}

// seq is one request's state inside the engine.
type seq struct {
	r         *Request
	keys      []uint64  // chained keys of the full prompt blocks that have ids
	blocks    []*cblock // the blocks s holds, in token order (vLLM's req_to_blocks)
	ncommit   int       // leading blocks of blocks that are committed (cached)
	computed  int       // tokens whose KV is computed
	generated int       // output tokens sampled
	started   bool      // Scheduled was reported
	waited    bool      // passed over at a step start
	firstDone bool
}

type scheduled struct {
	s *seq
	n int
}

// NewEngine returns the vLLM-style engine of spec (spec.Legacy is ignored) with numBlocks
// blocks of bs tokens.
func NewEngine(spec Spec, bs, numBlocks int) *Engine {
	return &Engine{spec: spec, bs: max(1, bs), cache: newKVCache(max(1, numBlocks))}
}

// Abort drops request id wherever it is (vLLM's abort_request): its blocks are freed, tail
// first; blocks it committed (those of the running step included: they were committed when
// it was scheduled, and that step's KV events are still published) stay cached, and the
// running step's tokens are not applied to it. It reports whether the request was known.
func (e *Engine) Abort(id int) bool {
	for i, s := range e.waiting {
		if s.r.ID == id {
			e.release(s)
			e.waiting = append(e.waiting[:i:i], e.waiting[i+1:]...)
			return true
		}
	}
	for i, s := range e.running {
		if s.r.ID != id {
			continue
		}
		e.release(s)
		e.running = append(e.running[:i], e.running[i+1:]...)
		for j, sc := range e.sched {
			if sc.s == s {
				e.sched = append(e.sched[:j], e.sched[j+1:]...)
				break
			}
		}
		return true
	}
	return false
}

// ResetPrefixCache empties the prefix cache (vLLM's reset_prefix_cache). Like vLLM it refuses,
// changing nothing, while any request holds blocks.
func (e *Engine) ResetPrefixCache() bool {
	c := e.cache
	if c.used() > 0 {
		return false
	}
	c.reset()
	return true
}

func (s *seq) output() int { return max(1, s.r.Output) }
func (s *seq) tokens() int { return s.r.Prompt + s.generated }
func ceilDiv(a, b int) int { return (a + b - 1) / b }
func (e *Engine) NextAt() float64 {
	if !e.busy {
		return inf
	}
	return e.stepEnd
}

// Submit implements Worker.
func (e *Engine) Submit(now float64, r *Request, out []Event) []Event {
	e.now = max(e.now, now)
	need := ceilDiv(r.Prompt+max(1, r.Output), e.bs)
	if r.Prompt < 1 || need > e.cache.numBlocks {
		return append(out, Event{Kind: Rejected, Req: r.ID})
	}
	s := &seq{r: r, keys: promptKeys(r, e.bs)}
	e.waiting = append(e.waiting, s)
	if !e.busy {
		out = e.start(out)
	}
	return out
}

// Advance implements Worker: the running step ends, its results are applied, and the next
// step starts if there is work.
func (e *Engine) Advance(out []Event) []Event {
	if !e.busy {
		return out
	}
	e.now = e.stepEnd
	e.busy = false
	out = append(out, e.pend...)
	clear(e.pend)
	e.pend = e.pend[:0]
	for _, sc := range e.sched {
		s := sc.s
		s.computed += sc.n
		if s.computed < s.tokens() {
			continue // prefill chunk: more to compute
		}
		s.generated++
		if !s.firstDone {
			s.firstDone = true
			out = append(out, Event{Kind: FirstToken, Req: s.r.ID})
		}
		if s.generated >= s.output() {
			out = e.finish(s, out)
		}
	}
	return e.start(out)
}

// commit caches s's prompt blocks whose tokens are all computed once tokens are (vLLM's
// cache_blocks, called from allocate_slots when the step is scheduled, so a block is a prefix
// hit for any request scheduled after it, in this step or later). The newly cached blocks go
// out as one Stored run, after any evictions that preceded it, when the step ends.
func (e *Engine) commit(s *seq, tokens int) {
	upto := min(len(s.keys), tokens/e.bs)
	if upto <= s.ncommit {
		return
	}
	e.flushEvicted()
	first := s.ncommit
	for i := first; i < upto; i++ {
		e.cache.commit(s.blocks[i], s.keys[i], s.r.Blocks[i])
	}
	s.ncommit = upto
	ev := Event{Kind: Stored, Req: s.r.ID, First: first, Blocks: s.r.Blocks[first:upto:upto]}
	if first > 0 {
		ev.Parent, ev.HasParent = s.r.Blocks[first-1], true
	}
	e.pend = append(e.pend, ev)
}

// flushEvicted moves the evictions recorded so far into the pending events.
func (e *Engine) flushEvicted() {
	if ev := e.cache.takeEvicted(); ev != nil {
		e.pend = append(e.pend, Event{Kind: Removed, Req: -1, Blocks: ev})
	}
}

// release frees every block s holds, tail first.
func (e *Engine) release(s *seq) {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		e.cache.unref(s.blocks[i])
	}
	clear(s.blocks)
	s.blocks, s.ncommit = s.blocks[:0], 0
}

func (e *Engine) finish(s *seq, out []Event) []Event {
	e.release(s)
	for i, r := range e.running {
		if r == s {
			e.running = append(e.running[:i], e.running[i+1:]...)
			break
		}
	}
	return append(out, Event{Kind: Finished, Req: s.r.ID})
}

// grow makes s hold the blocks for tokens computed tokens.
func (e *Engine) grow(s *seq, tokens int) bool {
	n := ceilDiv(tokens, e.bs) - len(s.blocks)
	if n <= 0 {
		return true
	}
	var ok bool
	s.blocks, ok = e.cache.alloc(n, s.blocks)
	return ok
}

// start schedules the next step (vLLM v1's schedule()): running requests first, newest
// preempted while blocks run short, then waiting ones FCFS.
func (e *Engine) start(out []Event) []Event {
	e.sched = e.sched[:0]
	budget := e.spec.MaxNumBatchedTokens
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(s.tokens()-s.computed, budget)
		ok := true
		for !e.grow(s, s.computed+n) {
			victim := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
			e.release(victim)
			victim.computed = 0
			e.waiting = append([]*seq{victim}, e.waiting...)
			e.preempt++
			preempted = true
			out = append(out, Event{Kind: Preempted, Req: victim.r.ID})
			if victim == s {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		e.commit(s, s.computed+n)
		e.sched = append(e.sched, scheduled{s, n})
		budget -= n
	}
	for !preempted && len(e.waiting) > 0 && len(e.running) < e.spec.MaxNumSeqs && budget > 0 {
		s := e.waiting[0]
		hits := e.lookup(s)
		computed := len(hits) * e.bs
		n := min(s.tokens()-computed, budget)
		newBlocks := ceilDiv(computed+n, e.bs) - len(hits)
		idle := 0
		for _, b := range hits {
			if b.refs == 0 {
				idle++
			}
		}
		if newBlocks > e.cache.available()-idle {
			break
		}
		for _, b := range hits {
			e.cache.ref(b)
		}
		s.blocks = append(s.blocks[:0], hits...)
		s.ncommit = len(hits)
		s.computed = computed
		s.blocks, _ = e.cache.alloc(newBlocks, s.blocks)
		e.commit(s, computed+n)
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		e.sched = append(e.sched, scheduled{s, n})
		budget -= n
		if !s.started {
			s.started = true
			out = append(out, Event{Kind: Scheduled, Req: s.r.ID, CachedTokens: computed, Waited: s.waited})
		}
	}
	for _, s := range e.waiting {
		s.waited = true
	}
	e.flushEvicted()
	if len(e.sched) == 0 {
		return out
	}
	e.busy = true
	e.stepEnd = e.now + e.stepMS()
	return out
}

// lookup returns s's cached leading blocks, capped so that one prompt token is computed.
func (e *Engine) lookup(s *seq) []*cblock {
	limit := min(len(s.keys), (s.tokens()-1)/e.bs)
	e.hits = e.cache.prefix(s.keys[:limit], e.hits[:0])
	return e.hits
}

// stepMS times the scheduled step.
func (e *Engine) stepMS() float64 {
	tokens, kv, decodes := 0, 0, 0
	pairs := 0.0
	for _, sc := range e.sched {
		tokens += sc.n
		if sc.n == 1 && sc.s.generated > 0 && sc.s.computed == sc.s.tokens()-1 {
			kv += sc.s.computed
			decodes++
		} else {
			pairs += attnPairs(sc.s.computed, sc.n)
		}
	}
	return e.spec.Step.StepMS(tokens, pairs, kv, decodes)
}

// CachedPrefix implements Worker.
func (e *Engine) CachedPrefix(blocks []uint64, prompt int) int {
	return cachedPrefix(blocks, prompt, e.bs, func(k uint64) bool { _, ok := e.cache.entries[k]; return ok })
}

// cachedPrefix is the tokens of the leading run of blocks whose chained keys cache holds (both
// engine models): whole blocks only, and never the prompt's last token (one is always
// computed).
func cachedPrefix(blocks []uint64, prompt, bs int, cached func(key uint64) bool) int {
	limit := min(len(blocks), prompt/bs, max(0, prompt-1)/bs)
	k := uint64(rootKey)
	n := 0
	for _, id := range blocks[:limit] {
		k = chainKey(k, id)
		if !cached(k) {
			break
		}
		n++
	}
	return n * bs
}

// Stats implements Worker.
func (e *Engine) Stats() Stats {
	c := e.cache
	return Stats{Running: len(e.running), Waiting: len(e.waiting), UsedBlocks: c.used(), NumBlocks: c.numBlocks,
		KVUsage: float64(c.used()) / float64(c.numBlocks), Preemptions: e.preempt, CachedBlocks: c.ncached}
}
