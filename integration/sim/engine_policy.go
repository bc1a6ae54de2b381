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
// EventSink Run feeds. When the engine configuration enables queueing (router_queue_threshold,
// router_queue_policy), requests go through the engine's own router queue, as kvselect's service
// sends them (engine.SelectQueued), and the policy is a Holder.
type EnginePolicy struct {
	name    string
	eng     *engine.Engine
	now     func() float64
	ids     []string
	evs     [1]engine.KVEvent
	hs      []int64
	queued  bool                  // queueing is on
	tickets map[engine.Ticket]int // parked request → simulated id
	ready   engine.Ready
	admits  [][2]int // admissions made while picking, handed to Run at the next Release
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
	infos := make([]WorkerInfo, max(workers, 0))
	for w := range infos {
		infos[w] = info
	}
	return NewEnginePolicyForWorkers(name, cfg, infos, seed)
}

// NewEnginePolicyForWorkers is NewEnginePolicyFor with worker w+1 registering infos[w]: a mixed
// fleet (fleet.Mix), whose workers differ in batch limits and KV capacity.
func NewEnginePolicyForWorkers(name string, cfg engine.Config, infos []WorkerInfo, seed uint64) (*EnginePolicy, error) {
	if cfg.PolicyConfig != "" {
		return nil, fmt.Errorf("sim: router policy classes are not simulated")
	}
	cfg.ActiveRequestExpiry = 24 * time.Hour // simulated time: never expire live requests
	eng, err := engine.New(cfg, engine.Options{Rand: rand.New(rand.NewPCG(seed, 7))})
	if err != nil {
		return nil, err
	}
	for w, info := range infos {
		bs, batched, total := uint32(info.BlockSize), uint64(info.MaxNumBatchedTokens), uint64(info.TotalKVBlocks)
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
	p := &EnginePolicy{name: name, eng: eng, now: func() float64 { return 0 }, queued: cfg.QueueingEnabled(), tickets: map[engine.Ticket]int{}}
	return p, nil
}

// Name implements Policy.
func (p *EnginePolicy) Name() string { return p.name }

func (p *EnginePolicy) clock() time.Time { return time.Unix(0, int64(p.now()*1e6)) }

// Pick implements Policy: the request goes through the engine's router queue, as the service
// sends it; with queueing on it parks when every rank is busy or others are parked.
func (p *EnginePolicy) Pick(v *View, id int, r *Request) int {
	p.now = v.Now
	for len(p.ids) <= id {
		p.ids = append(p.ids, strconv.Itoa(len(p.ids)))
	}
	p.hs = p.hs[:0]
	for _, b := range r.Blocks {
		p.hs = append(p.hs, int64(b))
	}
	hs := p.hs
	if p.queued {
		hs = slices.Clone(hs) // a parked request keeps its hashes
	}
	req := p.request(id, hs, uint64(r.Input))
	resp, t, err := p.eng.SelectQueued(&req, true, p.clock())
	w := worker(resp, err)
	if t != 0 {
		p.tickets[t] = id
		w = Held
	}
	// Dispatching after a park may admit requests at once, this one included.
	p.eng.TakeReady(&p.ready)
	for _, a := range p.ready.Admitted {
		if a.Ticket == t {
			w = worker(a.Resp, a.Err)
		} else {
			p.admits = append(p.admits, [2]int{p.tickets[a.Ticket], worker(a.Resp, a.Err)})
		}
		delete(p.tickets, a.Ticket)
	}
	return w
}

// Release implements Holder: the engine's router queue dispatches what it can (each parked
// request is selected with the index and load of that moment). A request the engine refuses
// stays unadmitted (Run counts it as rejected).
func (p *EnginePolicy) Release(v *View, admit func(id, worker int)) {
	p.now = v.Now
	for _, a := range p.admits {
		admit(a[0], a[1])
	}
	p.admits = p.admits[:0]
	p.eng.DrainQueue(p.clock())
	p.eng.TakeReady(&p.ready)
	for _, a := range p.ready.Admitted {
		admit(p.tickets[a.Ticket], worker(a.Resp, a.Err))
		delete(p.tickets, a.Ticket)
	}
}

// worker is the worker index of a booking, or −1 when the engine refused it.
func worker(resp *engine.SelectResponse, err error) int {
	if err != nil || resp == nil {
		return -1
	}
	return int(resp.WorkerID - 1)
}

// request is request id's selection request with these block (and sequence) hashes.
func (p *EnginePolicy) request(id int, hashes []int64, isl uint64) engine.SelectRequest {
	req := engine.SelectRequest{SelectionID: &p.ids[id]}
	req.BlockHashes, req.SequenceHashes, req.ISLTokens = hashes, hashes, &isl
	return req
}

// PrefillDone implements Policy. (Release, which Run calls after every PrefillDone and Done,
// drains the engine's outbox.)
func (p *EnginePolicy) PrefillDone(id int) { _ = p.eng.PrefillCompleteAt(p.ids[id], p.clock()) }

// Done implements Policy.
func (p *EnginePolicy) Done(id int) { _ = p.eng.Free(p.ids[id]) }

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
