package mockworker

import (
	"sync"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/integration/prefixcache"
)

// RankStats is a point-in-time view of one data-parallel rank.
type RankStats struct {
	DPRank       int     `json:"dp_rank"` // global DP rank
	Incarnation  uint64  `json:"incarnation"`
	Capacity     int     `json:"capacity_blocks"`
	CachedBlocks int     `json:"cached_blocks"`
	PinnedBlocks int     `json:"pinned_blocks"`
	Usage        float64 `json:"usage"` // pinned fraction of capacity (the decode model's u)
	Active       int     `json:"active_requests"`
	Requests     uint64  `json:"requests"`
	PromptTokens uint64  `json:"prompt_tokens"`
	CachedTokens uint64  `json:"cached_tokens"`
	Overcommits  uint64  `json:"overcommits"`
	// StoredBlocks and EvictedBlocks count blocks announced in BlockStored and BlockRemoved
	// events (AllBlocksCleared and restarts are not counted as evictions).
	StoredBlocks  uint64 `json:"stored_blocks"`
	EvictedBlocks uint64 `json:"evicted_blocks"`
	// Publisher reports the current incarnation's publisher.
	Publisher PublisherStats `json:"publisher"`
}

// rank is one data-parallel rank: its cache, its publisher and its prefill queue.
//
// Concurrency: mu guards every field. Publishing happens with mu held, so batches leave in
// the order the cache changed. inc numbers incarnations: a request remembers the incarnation
// it pinned blocks in and leaves the cache alone if a Restart replaced it meanwhile.
type rank struct {
	global int32
	pubCfg publisherConfig

	mu          sync.Mutex
	inc         uint64
	cache       *prefixcache.Cache // the legacy model's cache (es is nil then)
	es          *engState          // the vLLM-style engine of a realistic preset (cache unused)
	pub         *publisher         // nil once closed
	prefillFree float64            // model ms at which the current prefill queue drains
	active      int
	requests    uint64
	promptTok   uint64
	cachedTok   uint64
	stored      uint64
	evicted     uint64
	res         prefixcache.StoreResult
	evs         []kvevents.Event
}

// storeAndPublish caches hashes[hit:] after a prefill and publishes the resulting batch:
// one BlockRemoved with the evictions (if any), then one BlockStored per run of new blocks.
// tokens are the request's prompt; blockSize its block size. mu must be held.
func (r *rank) storeAndPublish(hashes []uint64, hit int, tokens []uint32, blockSize int) {
	r.cache.Store(hashes, hit, &r.res)
	r.evicted += uint64(len(r.res.Evicted))
	r.evs = r.evs[:0]
	if len(r.res.Evicted) > 0 {
		r.evs = append(r.evs, kvevents.Event{Kind: kvevents.KindBlockRemoved, BlockHashes: r.res.Evicted})
	}
	for _, run := range r.res.Runs {
		a, b := run[0], run[1]
		ev := kvevents.Event{
			Kind:        kvevents.KindBlockStored,
			BlockHashes: hashes[a:b],
			TokenIDs:    tokens[a*blockSize : b*blockSize],
			BlockSize:   blockSize,
		}
		if a > 0 {
			ev.Parent, ev.HasParent = hashes[a-1], true
		}
		r.evs = append(r.evs, ev)
		r.stored += uint64(b - a)
	}
	if len(r.evs) > 0 && r.pub != nil {
		r.pub.publish(r.evs)
	}
	clear(r.evs) // drop references to the request's slices
}

// stats returns the rank's view (mu must not be held).
func (r *rank) stats() RankStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := RankStats{
		DPRank: int(r.global), Incarnation: r.inc, Active: r.active, Requests: r.requests,
		PromptTokens: r.promptTok, CachedTokens: r.cachedTok, StoredBlocks: r.stored, EvictedBlocks: r.evicted,
	}
	if r.es != nil {
		st := r.es.eng.Stats()
		s.Capacity, s.CachedBlocks, s.PinnedBlocks, s.Usage = st.NumBlocks, st.CachedBlocks, st.UsedBlocks, st.KVUsage
	} else {
		s.Capacity, s.CachedBlocks, s.PinnedBlocks, s.Usage = r.cache.Capacity(), r.cache.Len(), r.cache.Pinned(), r.cache.Used()
		s.Overcommits = r.cache.Overcommits()
	}
	if r.pub != nil {
		s.Publisher = r.pub.snapshot()
	}
	return s
}
