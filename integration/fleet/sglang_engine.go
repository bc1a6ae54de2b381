package fleet

import "slices"

// SGLang is a second, independently designed engine model, after SGLang's scheduler
// (python/sglang/srt/managers/scheduler.py, schedule_policy.py, schedule_batch.py) with its
// RadixCache. It exists so that routing quality is not tuned against one engine's quirks.
// Where it differs from the vLLM-style Engine:
//
//   - A step is either a prefill batch or a decode batch, never both (enable_mixed_chunk is
//     off by default), and prefill goes first: each step first tries to build a prefill
//     batch (get_new_batch_prefill) and runs the decode batch only when none can be built.
//     A long chunked prompt therefore stalls every decode until its last chunk.
//   - Prefill admission follows PrefillAdder: the request mid-chunk continues first; then the
//     waiting queue, ordered by longest cached prefix ("lpm") while it holds at most
//     LPMQueueLimit requests, arrival order beyond; requests with no cached page that share
//     a first page with an earlier such request wait behind the rest (in-batch prefix
//     caching). A request is admitted while its new tokens plus its clipped max_new_tokens
//     stay below the free-plus-evictable pool minus what running requests are expected to
//     still write (remaining max_new_tokens × new_token_ratio); the batch's new tokens are
//     capped by ChunkedPrefillSize (the request that overflows is chunked, one at a time)
//     and MaxPrefillTokens, its size by MaxRunningRequests.
//   - The KV pool is token-granular and the prefix cache is a radix tree (radixCache).
//     Computed prompt pages are inserted when a prefill batch's results are processed
//     (cache_unfinished_req after each chunk and at the end of prefill), not when the step is
//     scheduled, so requests admitted beside the one computing a prefix do not hit it.
//   - When a decode batch has no room for one more token per request, requests are retracted
//     (retract_decode): fewest generated tokens first, longest prompt among those, until
//     the rest has room for RetractDecodeSteps more tokens each. A retracted request drops
//     its uncached tokens and its locks (its prompt pages stay cached), goes to the back of
//     the waiting queue and later recomputes prompt and output. new_token_ratio is then
//     raised to what the remaining requests have shown they write, and it decays back by
//     (init − min) / NewTokenRatioDecaySteps on every decode step without retraction.
//   - KV events: Stored for pages that become new tree nodes, published with the step's
//     results; Removed for evicted nodes, published with the next step's results (SGLang's
//     KV-event publisher flushes the radix cache's queue once per scheduler iteration).
//   - Step time from Roofline (a roofline max of memory and compute, separate prefill and
//     decode formulas, tensor-parallel communication, CUDA-graph launch cost).
//
// As in Engine, max_new_tokens is the request's Output, prompt tokens of a partial last block
// and generated tokens are never cached (a trace names no ids for them), at least one prompt
// token is computed, and a request that could never fit the pool is rejected at submission.
// SGLang is a pure state machine; it is not safe for concurrent use.
type SGLang struct {
	p          *SGLangParams
	bs         int
	cache      *radixCache
	waiting    []*sreq
	prefilling []*sreq // admitted, prompt not done (at most one of them is mid-chunk)
	running    []*sreq // decoding, in the order they joined
	batch      []sstep
	decode     bool // the running step is a decode batch
	busy       bool
	stepEnd    float64
	now        float64
	ratio      float64 // new_token_ratio
	retracts   int
	hits       []*rnode
	pend       []Event // evictions of the running step's scheduling, published with its results
}

type sreq struct {
	r         *Request
	keys      []uint64 // chained keys of the full prompt blocks that have ids
	nodes     []*rnode // locked tree pages: the leading cached pages of the prompt
	private   int      // pool tokens held outside the tree
	computed  int      // tokens whose KV is computed
	generated int
	match     int  // cached pages found by the last lpm ordering
	depri     bool // deprioritised by the in-batch prefix check
	started   bool
	waited    bool
	firstDone bool
}

type sstep struct {
	s *sreq
	n int
}

// NewSGLang returns the SGLang-style engine of spec (spec.SGLang must be set) with a pool of
// numBlocks × bs tokens.
func NewSGLang(spec Spec, bs, numBlocks int) *SGLang {
	bs = max(1, bs)
	return &SGLang{p: spec.SGLang, bs: bs, cache: newRadixCache(bs, max(1, numBlocks)*bs), ratio: spec.SGLang.InitNewTokenRatio}
}

func (s *sreq) output() int { return max(1, s.r.Output) }
func (s *sreq) tokens() int { return s.r.Prompt + s.generated }

// NextAt implements Worker.
func (e *SGLang) NextAt() float64 {
	if !e.busy {
		return inf
	}
	return e.stepEnd
}

// Submit implements Worker.
func (e *SGLang) Submit(now float64, r *Request, out []Event) []Event {
	e.now = max(e.now, now)
	if r.Prompt < 1 || r.Prompt+max(1, r.Output) >= e.cache.poolTokens {
		return append(out, Event{Kind: Rejected, Req: r.ID})
	}
	s := &sreq{r: r, keys: promptKeys(r, e.bs)}
	e.waiting = append(e.waiting, s)
	if !e.busy {
		out = e.start(out)
	}
	return out
}

// Advance implements Worker: the running batch's results are processed (pages inserted,
// tokens sampled, requests finished) and the next batch is scheduled.
func (e *SGLang) Advance(out []Event) []Event {
	if !e.busy {
		return out
	}
	e.now, e.busy = e.stepEnd, false
	out = append(out, e.pend...)
	clear(e.pend)
	e.pend = e.pend[:0]
	for _, sc := range e.batch {
		s := sc.s
		s.computed += sc.n
		if !e.decode {
			out = e.insert(s, out)
			if s.computed < s.tokens() {
				continue // more chunks to go
			}
			e.prefilling = remove(e.prefilling, s)
		}
		s.generated++
		if !s.firstDone {
			s.firstDone = true
			out = append(out, Event{Kind: FirstToken, Req: s.r.ID})
		}
		if s.generated >= s.output() {
			if e.decode {
				e.running = remove(e.running, s)
			}
			e.release(s)
			out = append(out, Event{Kind: Finished, Req: s.r.ID})
		} else if !e.decode {
			e.running = append(e.running, s)
		}
	}
	return e.start(out)
}

// insert caches s's computed full prompt pages that are not in the tree yet and reports the
// new ones as one Stored run.
func (e *SGLang) insert(s *sreq, out []Event) []Event {
	upto := min(len(s.keys), s.computed/e.bs)
	first := -1
	for i := len(s.nodes); i < upto; i++ {
		var parent *rnode
		if i > 0 {
			parent = s.nodes[i-1]
		}
		n, isNew := e.cache.insert(parent, s.keys[i], s.r.Blocks[i])
		s.private -= e.bs
		s.nodes = append(s.nodes, n)
		if isNew && first < 0 {
			first = i
		}
	}
	if first < 0 {
		return out
	}
	ev := Event{Kind: Stored, Req: s.r.ID, First: first, Blocks: s.r.Blocks[first:upto:upto]}
	if first > 0 {
		ev.Parent, ev.HasParent = s.r.Blocks[first-1], true
	}
	return append(out, ev)
}

// release drops s's locks and private tokens (its cached pages stay in the tree).
func (e *SGLang) release(s *sreq) {
	for _, n := range s.nodes {
		e.cache.unlock(n)
	}
	clear(s.nodes)
	s.nodes = s.nodes[:0]
	e.cache.release(s.private)
	s.private = 0
}

// start schedules the next batch: a prefill batch if one can be built, else a decode batch.
func (e *SGLang) start(out []Event) []Event {
	e.batch = e.batch[:0]
	e.decode = false
	if len(e.prefilling) > 0 || (len(e.waiting) > 0 && len(e.running) < e.p.MaxRunningRequests) {
		out = e.prefillBatch(out)
	}
	if len(e.batch) == 0 && len(e.running) > 0 {
		out = e.decodeBatch(out)
	}
	for _, s := range e.waiting {
		s.waited = true
	}
	if ev := e.cache.takeEvicted(); ev != nil {
		e.pend = append(e.pend, Event{Kind: Removed, Req: -1, Blocks: ev})
	}
	if len(e.batch) == 0 {
		out = append(out, e.pend...) // no step will publish them
		clear(e.pend)
		e.pend = e.pend[:0]
		return out
	}
	e.busy = true
	e.stepEnd = e.now + e.stepMS()
	return out
}

// reserve is what admission sets aside for s's remaining output (clipped).
func (e *SGLang) reserve(s *sreq) int {
	return min(max(s.output()-s.generated, 0), e.p.ClipMaxNewTokens)
}

// prefillBatch builds a prefill batch (PrefillAdder): the mid-chunk request, then waiting
// requests in policy order while the pool, the chunk and input budgets and the running-batch
// bound allow.
func (e *SGLang) prefillBatch(out []Event) []Event {
	c := e.cache
	offset := 0.0 // rem_total_token_offset: expected writes of running requests
	for _, s := range e.running {
		offset += float64(e.reserve(s)) * e.ratio
	}
	remTotal := func() float64 { return float64(c.free()+c.evictable) - offset }
	remChunk, remInput := e.p.ChunkedPrefillSize, e.p.MaxPrefillTokens
	for _, s := range e.prefilling { // the request mid-chunk (add_chunked_req)
		rem := s.tokens() - s.computed
		n := min(rem, remChunk, int(remTotal()))
		if n <= 0 || !c.alloc(n) {
			continue
		}
		s.private += n
		if n == rem {
			offset += float64(e.reserve(s))
		}
		remChunk -= n
		remInput -= n
		e.batch = append(e.batch, sstep{s, n})
	}
	// chunking: a request stays mid-chunk after this batch; only one may (new_chunked_req).
	chunking := len(e.prefilling) > len(e.batch)
	for _, sc := range e.batch {
		chunking = chunking || sc.n < sc.s.tokens()-sc.s.computed
	}
	e.order()
	admitted := 0
	for _, s := range e.waiting {
		if remChunk <= 0 || remInput <= 0 || remTotal() <= 0 || chunking {
			break
		}
		if len(e.running)+len(e.prefilling) >= e.p.MaxRunningRequests {
			break
		}
		limit := min(len(s.keys), (s.tokens()-1)/e.bs)
		e.hits = c.match(s.keys[:limit], e.hits[:0])
		cached := len(e.hits) * e.bs
		extend := s.tokens() - cached
		need := float64(extend + e.reserve(s))
		if need >= remTotal() || (extend >= remInput && len(e.batch) > 0) {
			break
		}
		for _, n := range e.hits {
			c.lock(n)
		}
		n := extend
		if extend > remChunk {
			n, chunking = remChunk, true
		}
		if need >= remTotal() || !c.alloc(n) {
			for _, h := range e.hits {
				c.unlock(h)
			}
			break
		}
		if !chunking {
			offset += float64(e.reserve(s))
		}
		s.nodes = append(s.nodes[:0], e.hits...)
		s.private, s.computed = n, cached
		remChunk -= n
		remInput -= n
		admitted++
		e.prefilling = append(e.prefilling, s)
		e.batch = append(e.batch, sstep{s, n})
		if !s.started {
			s.started = true
			out = append(out, Event{Kind: Scheduled, Req: s.r.ID, CachedTokens: cached, Waited: s.waited})
		}
	}
	e.waiting = e.waiting[admitted:] // admission takes a leading run of the ordered queue
	return out
}

// order sorts the waiting queue for admission: by longest cached prefix with the in-batch
// check while it is short enough for "lpm", left as it is (arrival order, or the last lpm
// order) otherwise.
func (e *SGLang) order() {
	if !e.p.LPM || len(e.waiting) > e.p.LPMQueueLimit || len(e.waiting) < 2 {
		return
	}
	seen := map[uint64]bool{}
	for _, s := range e.waiting {
		limit := min(len(s.keys), (s.tokens()-1)/e.bs)
		e.hits = e.cache.match(s.keys[:limit], e.hits[:0])
		s.match, s.depri = len(e.hits), false
		if s.match == 0 && len(s.keys) > 0 { // short match: the in-batch prefix check
			if seen[s.keys[0]] {
				s.depri = true
			} else {
				seen[s.keys[0]] = true
			}
		}
	}
	slices.SortStableFunc(e.waiting, func(a, b *sreq) int {
		ka, kb := a.match, b.match
		if a.depri {
			ka = -1
		}
		if b.depri {
			kb = -1
		}
		return kb - ka
	})
}

// decodeBatch builds the decode batch of every running request, retracting requests first
// if the pool cannot take one more token each (update_running_batch).
func (e *SGLang) decodeBatch(out []Event) []Event {
	c := e.cache
	if room := c.free() + c.evictable; room < len(e.running) {
		for first := true; first || (len(e.running) > 1 && c.free()+c.evictable < e.p.RetractDecodeSteps*len(e.running)); first = false {
			v := e.running[0]
			for _, s := range e.running[1:] {
				if s.generated < v.generated || (s.generated == v.generated && s.r.Prompt > v.r.Prompt) {
					v = s
				}
			}
			e.running = remove(e.running, v)
			e.release(v)
			v.computed = 0
			e.waiting = append(e.waiting, v)
			e.retracts++
			out = append(out, Event{Kind: Preempted, Req: v.r.ID})
		}
		decoded, maxNew := 0, 0
		for _, s := range e.running {
			decoded += s.generated
			maxNew += s.output()
		}
		e.ratio = min(1, float64(decoded+e.p.RetractDecodeSteps*len(e.running))/float64(max(1, maxNew)))
	} else {
		step := (e.p.InitNewTokenRatio - e.p.MinNewTokenRatio) / float64(max(1, e.p.NewTokenRatioDecaySteps))
		e.ratio = max(e.ratio-step, e.p.MinNewTokenRatio)
	}
	e.decode = true
	for _, s := range e.running {
		if !c.alloc(1) {
			continue // cannot happen after retraction; the request sits the step out
		}
		s.private++
		e.batch = append(e.batch, sstep{s, 1})
	}
	return out
}

// stepMS times the scheduled batch.
func (e *SGLang) stepMS() float64 {
	m := e.p.Cost
	if e.decode {
		kv := 0
		for _, sc := range e.batch {
			kv += sc.s.computed
		}
		return m.DecodeMS(len(e.batch), kv, e.p.CUDAGraphMaxBS)
	}
	tokens, pairs := 0, 0.0
	for _, sc := range e.batch {
		tokens += sc.n
		pairs += attnPairs(sc.s.computed, sc.n)
	}
	return m.PrefillMS(tokens, pairs)
}

// Abort drops request id wherever it is: its locks and uncached tokens are released, its
// cached pages stay, and the running batch's work for it is not applied. It reports whether
// the request was known.
func (e *SGLang) Abort(id int) bool {
	for _, list := range []*[]*sreq{&e.waiting, &e.prefilling, &e.running} {
		for _, s := range *list {
			if s.r.ID != id {
				continue
			}
			*list = remove(*list, s)
			e.release(s)
			e.batch = slices.DeleteFunc(e.batch, func(sc sstep) bool { return sc.s == s })
			return true
		}
	}
	return false
}

// ResetPrefixCache empties the tree (SGLang's flush_cache). Like SGLang it refuses, changing
// nothing, while any request is queued or running.
func (e *SGLang) ResetPrefixCache() bool {
	if len(e.waiting)+len(e.prefilling)+len(e.running) > 0 || e.cache.private > 0 {
		return false
	}
	e.cache.reset()
	return true
}

// CachedPrefix implements Worker.
func (e *SGLang) CachedPrefix(blocks []uint64, prompt int) int {
	return cachedPrefix(blocks, prompt, e.bs, func(k uint64) bool { _, ok := e.cache.nodes[k]; return ok })
}

// Stats implements Worker. UsedBlocks and KVUsage count the tokens requests hold (private
// and locked), SGLang's token usage; CachedBlocks the tree's pages.
func (e *SGLang) Stats() Stats {
	c := e.cache
	held := c.poolTokens - c.free() - c.evictable
	return Stats{Running: len(e.running) + len(e.prefilling), Waiting: len(e.waiting),
		UsedBlocks: ceilDiv(held, e.bs), NumBlocks: c.poolTokens / e.bs,
		KVUsage: float64(held) / float64(c.poolTokens), Preemptions: e.retracts, CachedBlocks: len(c.nodes)}
}

// remove deletes s from list, keeping the order.
func remove(list []*sreq, s *sreq) []*sreq {
	if i := slices.Index(list, s); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}
