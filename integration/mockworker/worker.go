package mockworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/integration/fleet"
	"github.com/kvselect/kvselect/integration/prefixcache"
)

// Request is one completion request: a tokenised prompt and a decode length.
type Request struct {
	// PromptTokenIDs is the prompt; it must not be empty.
	PromptTokenIDs []uint32 `json:"prompt_token_ids"`
	// MaxTokens is the number of tokens to decode (Config.DefaultMaxTokens when nil).
	MaxTokens *int `json:"max_tokens,omitempty"`
	// DPRank is the global data-parallel rank to serve on (what a router's selection names);
	// when nil the rank with the fewest active requests serves (lowest rank on ties).
	DPRank *int `json:"dp_rank,omitempty"`
}

// Result is what serving a request cost, in model milliseconds (see the package doc).
type Result struct {
	TTFTMS       float64 `json:"ttft_ms"`       // arrival → prefill end, queueing included
	CachedTokens int     `json:"cached_tokens"` // prompt tokens found in the prefix cache
	E2EMS        float64 `json:"e2e_ms"`        // TTFT + decode
	QueueMS      float64 `json:"queue_ms"`      // time spent waiting for earlier prefills
	PromptTokens int     `json:"prompt_tokens"`
	DPRank       int     `json:"dp_rank"` // global rank that served
}

// Worker is a simulated vLLM engine with one cache and one KV-event publisher per DP rank.
// Create it with New and release it with Close. All methods are safe for concurrent use.
type Worker struct {
	cfg   Config
	spec  fleet.Spec // the timing preset (cfg.Model)
	log   *slog.Logger
	epoch time.Time // clock reading at New: model time 0
	ranks []*rank

	mu     sync.Mutex // guards closed; taken before any rank's mu
	closed bool
}

// New validates cfg, binds every rank's sockets and returns a running worker. Errors wrap
// ErrInvalidConfig or ErrBind; on error nothing stays bound.
func New(cfg Config) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	spec, _ := fleet.Preset(cfg.Model) // validated
	w := &Worker{cfg: cfg, spec: spec, log: cfg.Logger.With("component", "mockworker"), epoch: cfg.Clock.Now()}
	for i := range cfg.DPSize {
		g := int32(cfg.DPStartRank + i)
		pc := publisherConfig{
			topic: cfg.Topic, rank: g, replayBuffer: cfg.ReplayBuffer, hwm: cfg.HWM,
			clock: cfg.Clock, log: w.log.With("dp_rank", g),
		}
		pc.endpoint, _ = RankEndpoint(cfg.KVEventsEndpoint, i) // validated
		if cfg.ReplayEndpoint != "" {
			pc.replayEndpoint, _ = RankEndpoint(cfg.ReplayEndpoint, i)
		}
		p, err := newPublisher(pc)
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		// A restart re-binds the actual ports, so random ports survive it.
		pc.endpoint, pc.replayEndpoint = p.pubEP, p.repEP
		w.ranks = append(w.ranks, w.newRank(g, pc, p))
	}
	return w, nil
}

// newRank is rank g with its publisher and an empty cache of the configured model.
func (w *Worker) newRank(g int32, pc publisherConfig, p *publisher) *rank {
	r := &rank{global: g, pubCfg: pc, pub: p}
	w.emptyCache(r)
	return r
}

// emptyCache gives r a new, empty cache (or engine) of the configured model.
func (w *Worker) emptyCache(r *rank) {
	if w.spec.Legacy {
		r.cache = prefixcache.New(w.cfg.NumGPUBlocks)
		return
	}
	r.es = newEngState(w.spec, w.cfg.BlockSize, w.cfg.NumGPUBlocks)
}

// Config returns the worker's configuration with defaults applied.
func (w *Worker) Config() Config { return w.cfg }

// Endpoints returns every rank's bound PUB endpoint (actual ports), in rank order.
func (w *Worker) Endpoints() []string {
	out := make([]string, len(w.ranks))
	for i, r := range w.ranks {
		out[i] = r.pubCfg.endpoint
	}
	return out
}

// ReplayEndpoints returns every rank's bound replay endpoint ("" without replay).
func (w *Worker) ReplayEndpoints() []string {
	out := make([]string, len(w.ranks))
	for i, r := range w.ranks {
		out[i] = r.pubCfg.replayEndpoint
	}
	return out
}

// rankOf returns the rank with global DP rank g.
func (w *Worker) rankOf(g int) (*rank, error) {
	i := g - w.cfg.DPStartRank
	if i < 0 || i >= len(w.ranks) {
		return nil, fmt.Errorf("%w: dp_rank %d not in [%d, %d)", ErrBadRequest, g, w.cfg.DPStartRank, w.cfg.DPStartRank+len(w.ranks))
	}
	return w.ranks[i], nil
}

// pick returns the requested rank or the least busy one.
func (w *Worker) pick(dp *int) (*rank, error) {
	if dp != nil {
		return w.rankOf(*dp)
	}
	best, bestActive := w.ranks[0], -1
	for _, r := range w.ranks {
		r.mu.Lock()
		a := r.active
		r.mu.Unlock()
		if bestActive < 0 || a < bestActive {
			best, bestActive = r, a
		}
	}
	return best, nil
}

// modelNow is the current model time in milliseconds.
func (w *Worker) modelNow() float64 {
	return float64(w.cfg.Clock.Now().Sub(w.epoch)) / float64(time.Millisecond) * w.cfg.Speedup
}

// sleepModel lets ms model milliseconds pass (ms / Speedup on the clock), rounded up to a whole
// nanosecond so that a request never wakes before its model deadline.
func (w *Worker) sleepModel(ctx context.Context, ms float64) error {
	return w.cfg.Clock.Sleep(ctx, time.Duration(math.Ceil(ms/w.cfg.Speedup*float64(time.Millisecond))))
}

func (w *Worker) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Serve runs one request through the engine model: it looks up the prompt's cached prefix,
// waits for its prefill slot and the prefill (sleeping on the clock), caches and publishes
// the new blocks, decodes max_tokens steps, and releases the blocks. It returns the model
// timings. When ctx ends early the request is abandoned (blocks released, nothing cached if
// the prefill had not finished) and ctx.Err() is returned. Errors wrap ErrBadRequest or
// ErrClosed otherwise.
func (w *Worker) Serve(ctx context.Context, req Request) (Result, error) {
	if w.isClosed() {
		return Result{}, ErrClosed
	}
	maxTokens := w.cfg.DefaultMaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	switch n := len(req.PromptTokenIDs); {
	case n == 0:
		return Result{}, fmt.Errorf("%w: prompt_token_ids is empty", ErrBadRequest)
	case n > w.cfg.MaxPromptTokens:
		return Result{}, fmt.Errorf("%w: prompt has %d tokens, limit %d", ErrBadRequest, n, w.cfg.MaxPromptTokens)
	case maxTokens < 0:
		return Result{}, fmt.Errorf("%w: max_tokens %d is negative", ErrBadRequest, maxTokens)
	}
	r, err := w.pick(req.DPRank)
	if err != nil {
		return Result{}, err
	}
	bs := w.cfg.BlockSize
	tokens := req.PromptTokenIDs
	hashes := EngineHashes(make([]uint64, 0, len(tokens)/bs), tokens, bs, w.cfg.HashSeed)
	if !w.spec.Legacy {
		return w.serveEngine(ctx, r, tokens, hashes, maxTokens)
	}

	// Arrival: look up the cached prefix and pin it (so no eviction can take it while the
	// prefill runs), and book the rank's prefill queue. Everything from here on is model time.
	arrive := w.modelNow()
	r.mu.Lock()
	inc := r.inc
	hit := r.cache.Prefix(hashes)
	r.cache.Pin(hashes[:hit])
	cached := hit * bs
	start := max(arrive, r.prefillFree)
	end := start + fleet.LegacyPrefillMS(len(tokens)-cached)
	r.prefillFree = end
	r.active++
	r.requests++
	r.promptTok += uint64(len(tokens))
	r.cachedTok += uint64(cached)
	r.mu.Unlock()

	// pinned is what this request holds in incarnation inc; finish gives it back. After a
	// Restart the old cache is gone and finish only fixes the active count.
	pinned := hashes[:hit]
	finish := func() {
		r.mu.Lock()
		if r.inc == inc {
			r.cache.Release(pinned)
		}
		r.active--
		r.mu.Unlock()
	}
	// Prefill: sleep until the booked end (queueing behind earlier prefills included).
	if err := w.sleepModel(ctx, end-w.modelNow()); err != nil {
		finish()
		return Result{}, err
	}
	// Prefill done: the new full blocks enter the cache and the batch goes out, unless the
	// engine restarted or closed meanwhile (a dead engine publishes nothing).
	r.mu.Lock()
	if r.inc == inc && r.pub != nil {
		r.storeAndPublish(hashes, hit, tokens, bs)
		pinned = hashes
	}
	u := r.cache.Used()
	r.mu.Unlock()

	// Decode: max_tokens steps at the utilisation seen now; then release the blocks.
	decode := float64(maxTokens) * fleet.LegacyITLMS(u)
	err = w.sleepModel(ctx, decode)
	finish()
	if err != nil {
		return Result{}, err
	}
	ttft := end - arrive
	return Result{
		TTFTMS: ttft, CachedTokens: cached, E2EMS: ttft + decode, QueueMS: start - arrive,
		PromptTokens: len(tokens), DPRank: int(r.global),
	}, nil
}

// CachedBlocks returns how many leading full blocks of tokens are cached on global DP rank
// dp right now.
func (w *Worker) CachedBlocks(dp int, tokens []uint32) (int, error) {
	r, err := w.rankOf(dp)
	if err != nil {
		return 0, err
	}
	hashes := EngineHashes(nil, tokens, w.cfg.BlockSize, w.cfg.HashSeed)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.es != nil {
		w.advanceLocked(r, r.es, w.modelNow())
		return r.es.eng.CachedPrefix(hashes, (len(hashes)+1)*w.cfg.BlockSize) / w.cfg.BlockSize, nil
	}
	return r.cache.Prefix(hashes), nil
}

// Reset empties every rank's prefix cache and publishes AllBlocksCleared on each, as vLLM's
// reset_prefix_cache does. Like vLLM it refuses (ErrBusy, nothing changed) while any request
// holds blocks.
func (w *Worker) Reset() error {
	if w.isClosed() {
		return ErrClosed
	}
	for _, r := range w.ranks {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	for _, r := range w.ranks {
		if r.es != nil {
			w.advanceLocked(r, r.es, w.modelNow())
			if st := r.es.eng.Stats(); st.UsedBlocks > 0 {
				return fmt.Errorf("%w: dp_rank %d has %d blocks in use", ErrBusy, r.global, st.UsedBlocks)
			}
		} else if r.cache.Pinned() > 0 {
			return fmt.Errorf("%w: dp_rank %d has %d pinned blocks", ErrBusy, r.global, r.cache.Pinned())
		}
	}
	for _, r := range w.ranks {
		if r.es != nil {
			r.es.eng.ResetPrefixCache()
		} else {
			r.cache.Clear()
		}
		if r.pub != nil {
			r.pub.publish([]kvevents.Event{{Kind: kvevents.KindAllBlocksCleared}})
		}
	}
	return nil
}

// Restart simulates an engine process restart on every rank: the publishers close (live
// subscribers see their connection drop), the caches empty without any event (a dead process
// announces nothing), and new publishers bind the same endpoints with sequence numbers from 0
// and empty replay buffers. Requests in flight finish their timing but touch no cache of the
// new incarnation. Errors wrap ErrBind (that rank stays without a publisher) or ErrClosed.
func (w *Worker) Restart() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	var errs []error
	for _, r := range w.ranks {
		r.mu.Lock()
		if r.pub != nil {
			r.pub.close()
			r.pub = nil
		}
		r.inc++
		w.emptyCache(r)
		r.prefillFree = 0 // a new process has an empty prefill queue
		p, err := newPublisher(r.pubCfg)
		if err != nil {
			errs = append(errs, err)
		} else {
			r.pub = p
		}
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// DropLive makes the next n live batches of global DP rank dp vanish on the way out: their
// sequence numbers are used and they stay in the replay buffer (a PUB high-water-mark drop
// as a subscriber sees it).
func (w *Worker) DropLive(dp, n int) error {
	r, err := w.rankOf(dp)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pub == nil {
		return ErrClosed
	}
	r.pub.dropNext(n)
	return nil
}

// Subscribed reports whether a subscriber has subscribed to global DP rank dp's PUB socket.
// go-zeromq's PUB drops batches while nobody is subscribed (vLLM's "slow joiner" loss), so
// tests wait for this before publishing what must arrive live.
func (w *Worker) Subscribed(dp int) bool {
	r, err := w.rankOf(dp)
	if err != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pub != nil && r.pub.subscribed()
}

// Published returns rank dp's buffered batches with seq ≥ from (the exact payload bytes sent),
// oldest first. The payloads must not be modified.
func (w *Worker) Published(dp int, from uint64) ([]Record, error) {
	r, err := w.rankOf(dp)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	p := r.pub
	r.mu.Unlock()
	if p == nil {
		return nil, ErrClosed
	}
	return p.records(from), nil
}

// Stats returns every rank's view, in rank order.
func (w *Worker) Stats() []RankStats {
	out := make([]RankStats, len(w.ranks))
	for i, r := range w.ranks {
		out[i] = r.stats()
	}
	return out
}

// Close closes every socket and waits for the replay goroutines. Later calls to Serve, Reset
// and Restart return ErrClosed. Close is idempotent and always returns nil.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	for _, r := range w.ranks {
		r.mu.Lock()
		if r.pub != nil {
			r.pub.close()
			r.pub = nil
		}
		r.mu.Unlock()
	}
	return nil
}
