package sim

import (
	"strconv"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"math/rand/v2"
)

// EnginePolicy routes with the real selection engine: select_and_reserve at arrival,
// prefill_complete and free as the request progresses, and the workers' KV events applied to the
// engine's index as they happen. It is also the EventSink to pass to Run.
type EnginePolicy struct {
	name string
	eng  *engine.Engine
	now  func() float64
	ids  []string
	evs  [1]engine.KVEvent
	hs   []int64
}

// NewEnginePolicy builds an engine with cfg and registers workers 1..n (rank 0, 512-token
// blocks). now returns the simulation clock in milliseconds.
func NewEnginePolicy(name string, cfg engine.Config, workers int, seed uint64) (*EnginePolicy, error) {
	cfg.ActiveRequestExpiry = 24 * time.Hour // simulated time: never expire live requests
	eng, err := engine.New(cfg, engine.Options{Rand: rand.New(rand.NewPCG(seed, 7))})
	if err != nil {
		return nil, err
	}
	bs := uint32(TraceBlockTokens)
	for w := range workers {
		id := uint64(w + 1)
		ep := "http://sim-worker-" + strconv.Itoa(w)
		kv := "tcp://127.0.0.1:1"
		if _, err := eng.UpsertWorker(engine.WorkerSpec{WorkerID: &id, Endpoint: &ep, BlockSize: &bs, KVEventsEndpoint: &kv}); err != nil {
			return nil, err
		}
	}
	return &EnginePolicy{name: name, eng: eng, now: func() float64 { return 0 }}, nil
}

// Name implements Policy.
func (p *EnginePolicy) Name() string { return p.name }

func (p *EnginePolicy) clock() time.Time { return time.Unix(0, int64(p.now()*1e6)) }

// Pick implements Policy.
func (p *EnginePolicy) Pick(v *View, id int, r *Request) int {
	p.now = v.Now
	for len(p.ids) <= id {
		p.ids = append(p.ids, strconv.Itoa(len(p.ids)))
	}
	p.hs = p.hs[:0]
	for _, b := range r.Blocks {
		p.hs = append(p.hs, int64(b))
	}
	isl := uint64(r.Input)
	req := engine.SelectRequest{SelectionID: &p.ids[id]}
	req.BlockHashes, req.SequenceHashes, req.ISLTokens = p.hs, p.hs, &isl
	resp, err := p.eng.SelectAndReserve(&req, p.clock())
	if err != nil {
		return -1
	}
	p.eng.TakeEffects(nil)
	return int(resp.WorkerID - 1)
}

// PrefillDone implements Policy.
func (p *EnginePolicy) PrefillDone(id int) {
	_ = p.eng.PrefillComplete(p.ids[id])
	p.eng.TakeEffects(nil)
}

// Done implements Policy.
func (p *EnginePolicy) Done(id int) { _ = p.eng.Free(p.ids[id]); p.eng.TakeEffects(nil) }

// Stored implements EventSink.
func (p *EnginePolicy) Stored(w int, parent uint64, hasParent bool, blocks []uint64) {
	p.evs[0] = engine.KVEvent{Kind: engine.KVStored, BlockHashes: blocks, LocalHashes: blocks, Parent: parent, HasParent: hasParent, BlockSize: TraceBlockTokens}
	p.eng.ApplyKVEvents(engine.Owner{Worker: uint64(w + 1)}, p.evs[:])
}

// Removed implements EventSink.
func (p *EnginePolicy) Removed(w int, blocks []uint64) {
	p.evs[0] = engine.KVEvent{Kind: engine.KVRemoved, BlockHashes: blocks}
	p.eng.ApplyKVEvents(engine.Owner{Worker: uint64(w + 1)}, p.evs[:])
}
