package engine

// The twin harness of the fast-path differential test (fast_test.go): two engines driven in
// lockstep by one random operation stream, compared after every operation.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// twin is a pair of engines driven in lockstep: fast may use the fast path, full never does.
type twin struct {
	t          *testing.T
	fast, full *Engine
	pf, pg     *rand.PCG // their random sources, compared after every operation
	rng        *rand.Rand
	now        time.Time
	ids        []string
	// Coverage: selections answered by the fast path, decisions made among tied minimum costs,
	// and selections that fell back to the general path.
	fastHits, ties, fallbacks int
	// Fast selections that met a live session binding, and bindings they dropped as stale.
	boundHits, staleDrops int
	// orderDrift makes every prefill completion timed and up to 1.5 s after the last event, so
	// that completions come in random order with time between them: a reordering engine's
	// first tokens (load/order.go), for the reordered-miss cost.
	orderDrift bool
}

func newTwin(t *testing.T, cfg Config, seed uint64) *twin {
	t.Helper()
	pf, pg := rand.NewPCG(seed, 77), rand.NewPCG(seed, 77)
	a, err := New(cfg, Options{Rand: rand.New(pf), WriterID: 5})
	noErr(t, err)
	b, err := New(cfg, Options{Rand: rand.New(pg), WriterID: 5})
	noErr(t, err)
	b.scratch.fast.disabled = true
	return &twin{t: t, fast: a, full: b, pf: pf, pg: pg, rng: rand.New(rand.NewPCG(seed, 1)), now: t0}
}

// teachReorder books 40 pairs of prompts on the first rank of the first partition and completes
// each pair younger first, a second apart, then frees it: the partition learns that its engines
// reorder (load/order.go), so the run prices misses for that.
func (tw *twin) teachReorder() {
	loads := tw.fast.Loads("", "")
	if len(loads) == 0 || len(loads[0].Loads) == 0 {
		return
	}
	pl, l := loads[0], loads[0].Loads[0]
	for i := range 40 {
		ids := []string{fmt.Sprint("warm-old-", i), fmt.Sprint("warm-young-", i)}
		for j, id := range ids {
			req := &SelectRequest{SelectionID: ptr(id), ModelName: ptr(pl.ModelName), RoutingGroup: ptr(pl.RoutingGroup),
				Prompt: tokenPrompt(toks(900_000+64*(2*i+j), 12)), PinnedWorker: &PinnedWorker{WorkerID: ptr(l.WorkerID), DPRank: ptr(l.DPRank)}}
			ra, ea := tw.fast.SelectAndReserve(req, tw.now)
			rb, eb := tw.full.SelectAndReserve(req, tw.now)
			tw.same(-1, "teach select", ra, rb, ea, eb)
			tw.now = tw.now.Add(10 * time.Millisecond)
		}
		for _, id := range []string{ids[1], ids[0]} {
			tw.now = tw.now.Add(time.Second)
			tw.same(-1, "teach prefill_complete_at", nil, nil, tw.fast.PrefillCompleteAt(id, tw.now), tw.full.PrefillCompleteAt(id, tw.now))
		}
		for _, id := range ids {
			tw.same(-1, "teach free", nil, nil, tw.fast.Free(id), tw.full.Free(id))
		}
	}
}

// same fails unless both engines produced equal results and their random sources agree.
func (tw *twin) same(step int, op string, ra, rb any, ea, eb error) {
	tw.t.Helper()
	if fmt.Sprint(ea) != fmt.Sprint(eb) {
		tw.t.Fatalf("step %d %s: errors differ: fast %v, full %v", step, op, ea, eb)
	}
	if !reflect.DeepEqual(ra, rb) {
		tw.t.Fatalf("step %d %s: results differ:\nfast %+v\nfull %+v", step, op, ra, rb)
	}
	sa, _ := tw.pf.MarshalBinary()
	sb, _ := tw.pg.MarshalBinary()
	if !bytes.Equal(sa, sb) {
		tw.t.Fatalf("step %d %s: random sources diverged", step, op)
	}
	var oa, ob Ready
	tw.fast.TakeReady(&oa)
	tw.full.TakeReady(&ob)
	fa, fb := oa.Replica, ob.Replica
	if !reflect.DeepEqual(fa, fb) {
		tw.t.Fatalf("step %d %s: replica effects differ:\nfast %+v\nfull %+v", step, op, fa, fb)
	}
	aa, ab := oa.Affinity, ob.Affinity
	if !reflect.DeepEqual(aa, ab) {
		tw.t.Fatalf("step %d %s: affinity effects differ:\nfast %+v\nfull %+v", step, op, aa, ab)
	}
}

// prompt draws tokens from a few shared prefixes so that ranks overlap and costs tie often.
func (tw *twin) prompt() []uint32 {
	sys := toks(1000*tw.rng.IntN(3), 4*tw.rng.IntN(4))
	if tw.rng.IntN(4) == 0 {
		sys = toks(1000*tw.rng.IntN(3), 48) // long cached prefixes: kvselect's affinity pull makes costs negative
	}
	tail := toks(50_000+100*tw.rng.IntN(6), tw.rng.IntN(14))
	return cat(sys, tail)
}

// request draws a selection request; most are fast-path eligible, some carry what forces the
// general path (filters, pins, affinity targets, temperature).
func (tw *twin) request(booking bool) *SelectRequest {
	r := tw.rng
	req := &SelectRequest{Prompt: tokenPrompt(tw.prompt())}
	if r.IntN(2) == 0 {
		id := fmt.Sprint("s", r.IntN(40))
		req.SelectionID = &id
	}
	if r.IntN(4) == 0 {
		req.SessionID = ptr(fmt.Sprint("sess", r.IntN(5)))
	}
	if r.IntN(5) == 0 {
		req.ExpectedOutputTokens = ptr(uint32(r.IntN(64)))
	}
	if !booking && r.IntN(4) == 0 {
		req.Advisory = true
	}
	if r.IntN(6) == 0 {
		o := &ConfigOverride{}
		switch r.IntN(4) {
		case 0:
			o.OverlapScoreCredit = ptr(float64(r.IntN(3)) / 2)
		case 1:
			o.TrackPrefillTokens = ptr(r.IntN(2) == 0)
		case 2:
			o.RouterTemperature = ptr(0.5)
		default:
			o.PrefillLoadScale = ptr(0.25 * float64(r.IntN(5)))
		}
		req.RouterConfigOverride = o
	}
	switch r.IntN(12) {
	case 0:
		req.AllowedWorkerIDs = []uint64{uint64(1 + r.IntN(6)), uint64(1 + r.IntN(6))}
	case 4:
		req.AllowedWorkerIDs = []uint64{uint64(1 + r.IntN(9))} // sometimes unknown: nothing eligible
	case 5:
		req.AllowedWorkerIDs = []uint64{} // present but empty: nothing eligible
	case 1:
		req.RoutingConstraints = &RoutingConstraints{PreferredTaints: map[string]float32{"gpu-a": 0.7}}
	case 2:
		req.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1 + r.IntN(6))), DPRank: ptr(uint32(r.IntN(4)))}
	case 3:
		req.AffinityTarget = &AffinityTarget{WorkerID: ptr(uint64(1 + r.IntN(6)))}
	}
	return req
}

// upsert registers (or re-registers) a random worker: 1–3 DP ranks, sometimes a hint type,
// a prefill capacity or a taint; worker 6 lives in another partition.
func (tw *twin) upsert() (WorkerRecord, WorkerRecord, error, error) {
	r := tw.rng
	id := uint64(1 + r.IntN(6))
	size := uint32(1 + r.IntN(3))
	start := uint32(id-1) * 4
	hint := r.IntN(3) == 0
	capacity := r.IntN(3) == 0
	taint := r.IntN(3) == 0
	kvBlocks := r.IntN(3) // 0: total_kv_blocks not registered; else small, so caches fill
	mk := func() WorkerSpec {
		s := spec(id, dp(start, size))
		if id == 6 {
			s.ModelName = ptr("other")
		}
		if hint {
			s.RouterHintWorkerType = ptr("prefill")
			s.RouterHintSourceControlEndpoints = map[string]string{}
			for rk := start; rk < start+size; rk++ {
				s.RouterHintSourceControlEndpoints[fmt.Sprint(rk)] = fmt.Sprintf("tcp://w%d-ctl:%d", id, rk)
			}
		}
		if capacity {
			s.MaxNumBatchedTokens = ptr(uint64(8 + r.IntN(64)))
		}
		if taint {
			s.Taints = []string{"gpu-a"}
		}
		if kvBlocks > 0 {
			s.TotalKVBlocks = ptr(uint64(4 + kvBlocks*r.IntN(24)))
		}
		return s
	}
	sa := mk()
	sb := sa // same pointers: specs are read-only for the engine
	ra, ea := tw.fast.UpsertWorker(sa)
	rb, eb := tw.full.UpsertWorker(sb)
	return ra, rb, ea, eb
}

// kv applies one random KV event (stored chain in a random tier, removal, or clear) to both.
func (tw *twin) kv() (KVApplyStats, KVApplyStats) {
	r := tw.rng
	w := uint64(1 + r.IntN(6))
	o := kvwire.Owner{Worker: w, Rank: uint32(w-1)*4 + uint32(r.IntN(3))}
	var ev KVEvent
	tokens := tw.prompt()
	switch r.IntN(8) {
	case 0:
		ev = storedEvent(o, TierOf("device"), nil, tokens, 4)
		ev.Kind = KVRemoved
		if len(ev.BlockHashes) > 1 {
			ev.BlockHashes = ev.BlockHashes[len(ev.BlockHashes)/2:]
		}
	case 1:
		ev = KVEvent{Kind: KVCleared}
	default:
		tier := []string{"device", "device", "device", "host_pinned", "disk", "external"}[r.IntN(6)]
		ev = storedEvent(o, TierOf(tier), nil, tokens, 4)
	}
	return tw.fast.ApplyKVEvents(o, []KVEvent{ev}), tw.full.ApplyKVEvents(o, []KVEvent{ev})
}

// checkFastState compares the last fast selection's per-rank arrays with the general path's
// scored candidates of the same selection.
func (tw *twin) checkFastState(step int, key PartitionKey) {
	tw.t.Helper()
	fs := &tw.fast.scratch.fast
	cs := tw.full.scratch.cands
	if len(fs.cost) != len(cs) {
		tw.t.Fatalf("step %d: fast path scored %d ranks, general path %d", step, len(fs.cost), len(cs))
	}
	p := tw.fast.parts[key]
	minCost, atMin := math.Inf(1), 0
	for i := range cs {
		s := &cs[i]
		ov := fs.ov[i]
		if p.owners[i] != s.Owner || ov[0] != s.DeviceBlocks || ov[1] != s.HostExtBlocks || ov[2]+ov[3] != s.DiskExtBlocks ||
			int(fs.booked[i]) != s.BookedPrefixBlocks {
			tw.t.Fatalf("step %d rank %d: fast inputs %v %+v booked %d, general %v dev %d host %d disk %d booked %d", step, i,
				p.owners[i], ov, fs.booked[i], s.Owner, s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, s.BookedPrefixBlocks)
		}
		if math.Float64bits(fs.cost[i]) != math.Float64bits(s.cost) {
			tw.t.Fatalf("step %d rank %d (%v): fast cost %v (%x), general %v (%x)", step, i, s.Owner,
				fs.cost[i], math.Float64bits(fs.cost[i]), s.cost, math.Float64bits(s.cost))
		}
		switch {
		case s.cost < minCost:
			minCost, atMin = s.cost, 1
		case s.cost == minCost:
			atMin++
		}
	}
	if atMin > 1 {
		tw.ties++
	}
}

// selectOp runs one Select or SelectAndReserve on both engines and compares everything.
func (tw *twin) selectOp(step int, booking bool) {
	req := tw.request(booking)
	hits := tw.fast.scratch.fast.hits
	sid := req.sessionID()
	boundBefore := false
	if p := tw.fast.parts[defKey]; p != nil {
		_, boundBefore = p.sessions[sid]
	}
	var ra, rb *SelectResponse
	var ea, eb error
	if booking {
		if req.SelectionID == nil {
			// A fresh UUID is drawn from each engine's source: equal sources give equal ids.
			req.SelectionID = nil
		}
		ra, ea = tw.fast.SelectAndReserve(req, tw.now)
		rb, eb = tw.full.SelectAndReserve(req, tw.now)
	} else {
		ra, ea = tw.fast.Select(req, tw.now)
		rb, eb = tw.full.Select(req, tw.now)
	}
	tw.same(step, "select", ra, rb, ea, eb)
	if ra != nil && ra.SelectionID != nil {
		tw.ids = append(tw.ids, *ra.SelectionID)
	}
	if tw.fast.scratch.fast.hits != hits {
		tw.fastHits++
		if boundBefore && tw.fast.cfg.SessionAffinityTTL > 0 && req.PinnedWorker == nil && req.AffinityTarget == nil {
			tw.boundHits++
			if _, still := tw.fast.parts[defKey].sessions[sid]; !still {
				tw.staleDrops++
			}
		}
		if ea == nil {
			tw.checkFastState(step, PartitionKey{Model: DefaultName, Group: DefaultName})
		}
	} else {
		tw.fallbacks++
	}
}

// id returns a booking id seen earlier (or an unknown one).
func (tw *twin) id() string {
	if len(tw.ids) == 0 || tw.rng.IntN(10) == 0 {
		return "unknown"
	}
	return tw.ids[tw.rng.IntN(len(tw.ids))]
}

func (tw *twin) run(steps int) {
	for range 3 {
		ra, rb, ea, eb := tw.upsert()
		tw.same(-1, "upsert", ra, rb, ea, eb)
	}
	if tw.orderDrift {
		tw.teachReorder()
	}
	for step := range steps {
		r := tw.rng
		switch op := r.IntN(100); {
		case op < 5:
			ra, rb, ea, eb := tw.upsert()
			tw.same(step, "upsert", ra, rb, ea, eb)
		case op < 7:
			id := uint64(1 + r.IntN(6))
			ra, ea := tw.fast.DeleteWorker(id)
			rb, eb := tw.full.DeleteWorker(id)
			tw.same(step, "delete", ra, rb, ea, eb)
		case op < 25:
			a, b := tw.kv()
			tw.same(step, "kv", a, b, nil, nil)
		case op < 45:
			tw.selectOp(step, false)
		case op < 70:
			tw.selectOp(step, true)
		case op < 76:
			id := tw.id()
			req := &ReservationRequest{SelectionID: &id}
			ra, ea := tw.fast.Reserve(req, tw.now)
			rb, eb := tw.full.Reserve(req, tw.now)
			tw.same(step, "reserve", ra, rb, ea, eb)
		case op < 79 && !tw.orderDrift:
			id := tw.id()
			tw.same(step, "prefill_complete", nil, nil, tw.fast.PrefillComplete(id), tw.full.PrefillComplete(id))
		case op < 82: // timed: teaches the rank's speed (the kvselect policy's consensus moves)
			id := tw.id()
			if tw.orderDrift {
				tw.now = tw.now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
			}
			tw.same(step, "prefill_complete_at", nil, nil, tw.fast.PrefillCompleteAt(id, tw.now), tw.full.PrefillCompleteAt(id, tw.now))
		case op < 86:
			id := tw.id()
			f := ptr(0.5)
			tw.same(step, "output_block", nil, nil, tw.fast.OutputBlock(id, f), tw.full.OutputBlock(id, f))
		case op < 93:
			id := tw.id()
			tw.same(step, "free", nil, nil, tw.fast.Free(id), tw.full.Free(id))
		case op < 97:
			w := uint64(1 + r.IntN(5))
			tokens := tw.prompt()
			ev := &ReplicaEvent{Partition: defKey, BlockSize: 4, RequestID: fmt.Sprint("peer", r.IntN(20)),
				Owner: kvwire.Owner{Worker: w, Rank: uint32(w-1) * 4}, Kind: LifecycleKind(1 + r.IntN(3)), Sender: "peer-a"}
			if ev.Kind == LifecycleAdd {
				ev.Add = &ReplicaAdd{TokenSequence: kvhashSeq(tokens), TrackPrefill: true, PrefillTokens: uint64(len(tokens)), ISL: uint64(len(tokens))}
			}
			tw.same(step, "replica", tw.fast.ApplyReplica(ev, tw.now), tw.full.ApplyReplica(ev, tw.now), nil, nil)
		default:
			tw.now = tw.now.Add(time.Duration(r.IntN(90)) * time.Second)
			tw.same(step, "sweep", tw.fast.Sweep(tw.now), tw.full.Sweep(tw.now), nil, nil)
		}
	}
	// The observable state ends equal too.
	tw.same(steps, "loads", tw.fast.Loads("", ""), tw.full.Loads("", ""), nil, nil)
}
