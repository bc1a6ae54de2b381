package fleet

import (
	"container/heap"

	"github.com/kvselect/kvselect/integration/prefixcache"
)

// legacy is the simulator's old worker model (see the package doc): one FIFO prefill at a time
// timed by LegacyPrefillMS of the tokens uncached when it starts; decode runs beside prefill
// for Output tokens at LegacyITLMS of the pinned fraction when decoding starts. Blocks are
// keyed by the caller's ids (prefixcache), pinned from prefill start to decode end.
type legacy struct {
	bs       int
	cache    *prefixcache.Cache
	res      prefixcache.StoreResult
	queue    []*legacyReq
	prefill  *legacyReq // running prefill, nil when idle
	endAt    float64
	decodes  decodeHeap
	now      float64
	inflight int
	seq      int
}

type legacyReq struct {
	r      *Request
	hit    int
	waited bool
}

type decodeEnd struct {
	at  float64
	seq int
	r   *legacyReq
}

type decodeHeap []decodeEnd

func (h decodeHeap) Len() int { return len(h) }
func (h decodeHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h decodeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *decodeHeap) Push(x any)   { *h = append(*h, x.(decodeEnd)) }
func (h *decodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newLegacy(bs, numBlocks int) *legacy {
	return &legacy{bs: bs, cache: prefixcache.New(numBlocks)}
}

func (l *legacy) NextAt() float64 {
	t := inf
	if l.prefill != nil {
		t = l.endAt
	}
	if len(l.decodes) > 0 && l.decodes[0].at <= t {
		t = l.decodes[0].at
	}
	return t
}

func (l *legacy) Submit(now float64, r *Request, out []Event) []Event {
	l.now = max(l.now, now)
	q := &legacyReq{r: r, waited: l.prefill != nil}
	l.queue = append(l.queue, q)
	l.inflight++
	return l.startPrefill(out)
}

// Advance completes the earliest due event: a decode end first at equal times, as the old
// simulator ordered them.
func (l *legacy) Advance(out []Event) []Event {
	if len(l.decodes) > 0 && (l.prefill == nil || l.decodes[0].at <= l.endAt) {
		d := heap.Pop(&l.decodes).(decodeEnd)
		l.now = d.at
		l.cache.Release(d.r.r.Blocks)
		l.inflight--
		return append(out, Event{Kind: Finished, Req: d.r.r.ID})
	}
	if l.prefill == nil {
		return out
	}
	q := l.prefill
	l.now, l.prefill = l.endAt, nil
	l.cache.Store(q.r.Blocks, q.hit, &l.res)
	for _, run := range l.res.Runs {
		ev := Event{Kind: Stored, Req: q.r.ID, First: run[0], Blocks: q.r.Blocks[run[0]:run[1]:run[1]]}
		if run[0] > 0 {
			ev.Parent, ev.HasParent = q.r.Blocks[run[0]-1], true
		}
		out = append(out, ev)
	}
	if len(l.res.Evicted) > 0 {
		out = append(out, Event{Kind: Removed, Req: -1, Blocks: append([]uint64(nil), l.res.Evicted...)})
	}
	out = append(out, Event{Kind: FirstToken, Req: q.r.ID})
	l.seq++
	heap.Push(&l.decodes, decodeEnd{at: l.now + float64(max(1, q.r.Output))*LegacyITLMS(l.cache.Used()), seq: l.seq, r: q})
	return l.startPrefill(out)
}

func (l *legacy) startPrefill(out []Event) []Event {
	if l.prefill != nil || len(l.queue) == 0 {
		return out
	}
	q := l.queue[0]
	l.queue = l.queue[1:]
	q.hit = l.cache.Prefix(q.r.Blocks)
	l.cache.Pin(q.r.Blocks[:q.hit])
	cached := min(q.hit*l.bs, q.r.Prompt)
	l.prefill, l.endAt = q, l.now+LegacyPrefillMS(max(0, q.r.Prompt-q.hit*l.bs))
	return append(out, Event{Kind: Scheduled, Req: q.r.ID, CachedTokens: cached, Waited: q.waited})
}

func (l *legacy) CachedPrefix(blocks []uint64, prompt int) int {
	return min(l.cache.Prefix(blocks)*l.bs, prompt)
}

func (l *legacy) Stats() Stats {
	running := len(l.decodes)
	if l.prefill != nil {
		running++
	}
	return Stats{Running: running, Waiting: len(l.queue), KVUsage: l.cache.Used(), UsedBlocks: l.cache.Pinned(), NumBlocks: l.cache.Capacity(), CachedBlocks: l.cache.Len()}
}
