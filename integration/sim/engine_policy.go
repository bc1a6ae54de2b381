package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// EnginePolicy routes with the real selection engine: select_and_reserve at arrival,
// prefill_complete at the first token and free at the end, and the workers' KV events applied
// to the engine's index when they are delivered (Config.KVEventDelayMS late). It is the
// EventSink Run feeds. When the engine
// configuration enables queueing (router_queue_threshold), it holds requests in a router queue
// as kvselect's service does (router_queue.go) and is a Holder.
type EnginePolicy struct {
	name  string
	eng   *engine.Engine
	now   func() float64
	ids   []string
	evs   [1]engine.KVEvent
	hs    []int64
	queue *routerQueue // nil when queueing is off
}

var _ Holder = (*EnginePolicy)(nil)

// BatchedTokens is the max_num_batched_tokens every preset's workers register (vLLM's default
// for online serving on ≥ 70 GiB GPUs). Busy checks scale router_queue_threshold by it: with
// threshold 0.5, a rank is busy while more than 4,096 of its booked prompt tokens wait for
// prefill_complete.
const BatchedTokens = 8192

// NewEnginePolicy is NewEnginePolicyFor with workers that register 512-token blocks and
// BatchedTokens, and no KV capacity.
func NewEnginePolicy(name string, cfg engine.Config, workers int, seed uint64) (*EnginePolicy, error) {
	return NewEnginePolicyFor(name, cfg, WorkerInfo{BlockSize: TraceBlockTokens, MaxNumBatchedTokens: BatchedTokens}, workers, seed)
}

// NewEnginePolicyFor builds an engine with cfg and registers workers 1..n (rank 0) with the
// fields of info, as a deployment's workers register themselves: block size,
// max_num_batched_tokens and total_kv_blocks (when positive). Nothing else about the simulated
// engines reaches the selection engine. Router policy classes (cfg.PolicyConfig) are not
// simulated.
func NewEnginePolicyFor(name string, cfg engine.Config, info WorkerInfo, workers int, seed uint64) (*EnginePolicy, error) {
	if cfg.PolicyConfig != "" {
		return nil, fmt.Errorf("sim: router policy classes are not simulated")
	}
	cfg.ActiveRequestExpiry = 24 * time.Hour // simulated time: never expire live requests
	eng, err := engine.New(cfg, engine.Options{Rand: rand.New(rand.NewPCG(seed, 7))})
	if err != nil {
		return nil, err
	}
	bs, batched, total := uint32(info.BlockSize), uint64(info.MaxNumBatchedTokens), uint64(info.TotalKVBlocks)
	for w := range workers {
		id := uint64(w + 1)
		ep := "http://sim-worker-" + strconv.Itoa(w)
		kv := "tcp://127.0.0.1:1"
		spec := engine.WorkerSpec{WorkerID: &id, Endpoint: &ep, BlockSize: &bs, KVEventsEndpoint: &kv, MaxNumBatchedTokens: &batched}
		if total > 0 {
			spec.TotalKVBlocks = &total
		}
		if _, err := eng.UpsertWorker(spec); err != nil {
			return nil, err
		}
	}
	p := &EnginePolicy{name: name, eng: eng, now: func() float64 { return 0 }}
	if cfg.QueueingEnabled() {
		if p.queue, err = newRouterQueue(cfg.QueuePolicy); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Name implements Policy.
func (p *EnginePolicy) Name() string { return p.name }

func (p *EnginePolicy) clock() time.Time { return time.Unix(0, int64(p.now()*1e6)) }

// Pick implements Policy: the request is parked when queueing is on and every rank is busy or
// others are parked, selected and booked otherwise.
func (p *EnginePolicy) Pick(v *View, id int, r *Request) int {
	p.now = v.Now
	for len(p.ids) <= id {
		p.ids = append(p.ids, strconv.Itoa(len(p.ids)))
	}
	p.hs = p.hs[:0]
	for _, b := range r.Blocks {
		p.hs = append(p.hs, int64(b))
	}
	req := p.request(id, p.hs, uint64(r.Input))
	if p.queue != nil {
		probe, err := p.eng.ProbeQueue(&req)
		if err != nil {
			return -1
		}
		// A newcomer never overtakes parked requests, as in the service. Here that is also
		// implied: Release stops only when the head finds every rank busy, and nothing frees a
		// rank between lifecycle events, so a newcomer finds them busy too.
		if probe.Busy || p.queue.Len() > 0 {
			req = p.request(id, slices.Clone(p.hs), probe.ISL)
			p.queue.park(id, req, probe.ISL, probe.Cached, probe.ServiceMS, v.Now())
			return Held
		}
	}
	return p.selectAndReserve(&req)
}

// Release implements Holder: parked requests go, best first, while the best one finds a rank
// that is not busy. A request the engine refuses stays unadmitted (Run counts it as rejected).
func (p *EnginePolicy) Release(_ *View, admit func(id, worker int)) {
	for q := p.queue; q != nil && q.Len() > 0; {
		head := q.head()
		probe, err := p.eng.ProbeQueue(&head.req)
		if err == nil && probe.Busy {
			return
		}
		id, w := head.id, -1
		if err == nil {
			w = p.selectAndReserve(&head.req)
		}
		q.pop()
		admit(id, w)
	}
}

// request is request id's selection request with these block (and sequence) hashes.
func (p *EnginePolicy) request(id int, hashes []int64, isl uint64) engine.SelectRequest {
	req := engine.SelectRequest{SelectionID: &p.ids[id]}
	req.BlockHashes, req.SequenceHashes, req.ISLTokens = hashes, hashes, &isl
	return req
}

// selectAndReserve books req and returns its worker index, or −1 when the engine refuses it.
func (p *EnginePolicy) selectAndReserve(req *engine.SelectRequest) int {
	resp, err := p.eng.SelectAndReserve(req, p.clock())
	if err != nil {
		return -1
	}
	p.eng.TakeEffects(nil)
	return int(resp.WorkerID - 1)
}

// PrefillDone implements Policy.
func (p *EnginePolicy) PrefillDone(id int) {
	_ = p.eng.PrefillCompleteAt(p.ids[id], p.clock())
	p.eng.TakeEffects(nil)
}

// Done implements Policy.
func (p *EnginePolicy) Done(id int) { _ = p.eng.Free(p.ids[id]); p.eng.TakeEffects(nil) }

// Stored implements EventSink.
func (p *EnginePolicy) Stored(w int, parent uint64, hasParent bool, blocks []uint64) {
	p.evs[0] = engine.KVEvent{Kind: engine.KVStored, BlockHashes: blocks, LocalHashes: blocks, Parent: parent, HasParent: hasParent, BlockSize: TraceBlockTokens}
	p.eng.ApplyKVEvents(kvwire.Owner{Worker: uint64(w + 1)}, p.evs[:])
}

// Removed implements EventSink.
func (p *EnginePolicy) Removed(w int, blocks []uint64) {
	p.evs[0] = engine.KVEvent{Kind: engine.KVRemoved, BlockHashes: blocks}
	p.eng.ApplyKVEvents(kvwire.Owner{Worker: uint64(w + 1)}, p.evs[:])
}
