package mockworker

import (
	"context"
	"fmt"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/integration/fleet"
)

// engState is one incarnation of a rank's realistic engine (the fleet model of a vLLM-style
// or SGLang-style preset). The engine only moves when someone looks: every Serve call, on
// arrival and each time it wakes, first advances the engine through every step due by the
// current model time, publishing each step's KV events as one batch (vLLM publishes once per
// scheduler step). A Restart replaces the rank's engState; requests of the old incarnation keep advancing their
// own engine but publish nothing.
//
// Guarded by the owning rank's mu.
type engState struct {
	eng    fleet.Controllable
	reqs   map[int]*engReq // by engine request id, until finished
	nextID int
	buf    []fleet.Event
}

// engReq is one request's progress inside the engine, in model milliseconds (-1: not yet).
type engReq struct {
	tokens             []uint32
	arrive             float64
	sched, first, done float64
	cached             int
	rejected           bool
}

func newEngState(spec fleet.Spec, bs, blocks int) *engState {
	return &engState{eng: fleet.NewControllable(spec, bs, blocks), reqs: make(map[int]*engReq)}
}

// advanceLocked runs es's steps due by now. r.mu held.
func (w *Worker) advanceLocked(r *rank, es *engState, now float64) {
	for {
		at := es.eng.NextAt()
		if at > now {
			return
		}
		es.buf = es.eng.Advance(es.buf[:0])
		w.applyLocked(r, es, at, es.buf)
	}
}

// applyLocked records what the engine reported at model time at and publishes its KV events as
// one batch if es is the rank's live incarnation. r.mu held.
func (w *Worker) applyLocked(r *rank, es *engState, at float64, evs []fleet.Event) {
	bs := w.cfg.BlockSize
	out := r.evs[:0]
	for _, ev := range evs {
		q := es.reqs[ev.Req]
		switch ev.Kind {
		case fleet.Scheduled:
			q.sched, q.cached = at, ev.CachedTokens
			if es == r.es {
				r.cachedTok += uint64(ev.CachedTokens)
			}
		case fleet.Stored:
			e := kvevents.Event{Kind: kvevents.KindBlockStored, BlockHashes: ev.Blocks, BlockSize: bs,
				TokenIDs: q.tokens[ev.First*bs : (ev.First+len(ev.Blocks))*bs], Parent: ev.Parent, HasParent: ev.HasParent}
			out = append(out, e)
		case fleet.Removed:
			out = append(out, kvevents.Event{Kind: kvevents.KindBlockRemoved, BlockHashes: ev.Blocks})
		case fleet.FirstToken:
			q.first = at
		case fleet.Finished:
			q.done = at
			delete(es.reqs, ev.Req)
		case fleet.Rejected:
			q.rejected = true
			delete(es.reqs, ev.Req)
		}
	}
	if len(out) > 0 && es == r.es && r.pub != nil {
		for _, e := range out {
			if e.Kind == kvevents.KindBlockStored {
				r.stored += uint64(len(e.BlockHashes))
			} else {
				r.evicted += uint64(len(e.BlockHashes))
			}
		}
		r.pub.publish(out)
	}
	clear(out) // drop references to the requests' slices
	r.evs = out[:0]
}

// serveEngine runs one request through rank r's vLLM-style engine (see Serve).
func (w *Worker) serveEngine(ctx context.Context, r *rank, tokens []uint32, hashes []uint64, maxTokens int) (Result, error) {
	arrive := w.modelNow()
	r.mu.Lock()
	es := r.es
	w.advanceLocked(r, es, arrive)
	id := es.nextID
	es.nextID++
	q := &engReq{tokens: tokens, arrive: arrive, sched: -1, first: -1, done: -1}
	es.reqs[id] = q
	r.active++
	r.requests++
	r.promptTok += uint64(len(tokens))
	fr := &fleet.Request{ID: id, Prompt: len(tokens), Output: max(1, maxTokens), Blocks: hashes}
	es.buf = es.eng.Submit(arrive, fr, es.buf[:0])
	w.applyLocked(r, es, arrive, es.buf)
	for q.done < 0 && !q.rejected {
		now := w.modelNow()
		w.advanceLocked(r, es, now)
		if q.done >= 0 || q.rejected {
			break
		}
		next := es.eng.NextAt()
		r.mu.Unlock()
		err := w.sleepModel(ctx, next-now)
		r.mu.Lock()
		if err != nil {
			es.eng.Abort(id)
			delete(es.reqs, id)
			r.active--
			r.mu.Unlock()
			return Result{}, err
		}
	}
	r.active--
	r.mu.Unlock()
	if q.rejected {
		return Result{}, fmt.Errorf("%w: prompt of %d tokens plus %d to generate cannot fit %d blocks of %d tokens",
			ErrBadRequest, len(tokens), maxTokens, w.cfg.NumGPUBlocks, w.cfg.BlockSize)
	}
	return Result{
		TTFTMS: q.first - arrive, CachedTokens: q.cached, E2EMS: q.done - arrive, QueueMS: q.sched - arrive,
		PromptTokens: len(tokens), DPRank: int(r.global),
	}, nil
}
