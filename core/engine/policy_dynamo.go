package engine

import (
	"math"

	"github.com/kvselect/kvselect/core/engine/load"
)

// The cost function (spec §5.2–§5.3). Lower is better. For each eligible (worker, rank):
//
//	cached_tokens   = round((device + host_w·host_ext + disk_w·disk_ext) · block_size)
//	raw_prefill     = track ? active_prefill + max(isl, cached_tokens) : 0          (tokens)
//	decay_factor    = track && decay > 0 ? 1 / (1 + decay·((active_prefill − min_active_prefill)/bs)/request_blocks) : 1
//	overlap_credit  = credit·decay_factor·device + host_w·host_ext + disk_w·disk_ext   (blocks)
//	decode_cost     = active_blocks + (len(tracking hashes) − live prefix on the rank)
//	cost            = (scale·max(0, raw_prefill/bs − overlap_credit) + decode_cost
//	                   + request_w·active_requests) · preferred_taint_multiplier
//
// With the default weights this is exactly Dynamo's aggregated-worker formula.

// dynamoPolicy is Dynamo's formula (PolicyDynamo). Its per-rank arithmetic is dynamoTerms.cost,
// shared by both paths. It runs for every schedulable rank on every selection, so the common case
// (no lower-tier hits, no decay) avoids float rounding and divisions.
type dynamoPolicy struct{}

func (dynamoPolicy) costs(cs []scored, n normalized, blockSize uint32, w weights) {
	k := newDynamoTerms(&n, blockSize, w)
	if k.decaying {
		for i := range cs {
			k.minActive = min(k.minActive, cs[i].Load.ActivePrefillTokens)
		}
	}
	for i := range cs {
		s := &cs[i]
		s.cost = k.cost(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, s.BookedPrefixBlocks, s.Load)
	}
}

func (dynamoPolicy) fast(e *Engine, sel *selection) {
	f := &e.scratch.fast
	k := newDynamoTerms(&sel.norm, sel.p.blockSize, sel.w)
	tr, ov, booked, cost := sel.p.tracker, f.ov, f.booked, f.cost
	if k.decaying {
		for i := range cost {
			prefill, _, _, _, _ := tr.CountersAt(i)
			k.minActive = min(k.minActive, prefill)
		}
	}
	// The dispatch of dynamoTerms.cost, with simpleCost inlined.
	pick, draw, elig := f.pick, f.draw, f.mask
	for i := range cost {
		prefill, blocks, requests, _, _ := tr.CountersAt(i)
		o := &ov[i]
		var c float64
		if o[1]|o[2]|o[3] == 0 && k.simple {
			c = k.simpleCost(o[0], int(booked[i]), prefill, blocks, requests)
		} else {
			c = k.costGeneral(o[0], o[1], o[2]+o[3], int(booked[i]), prefill, blocks, requests)
		}
		cost[i] = c
		if draw && (elig == nil || elig[i]) {
			pick.offer(i, c)
		}
	}
	f.pick = pick
}

// dynamoTerms holds the per-selection invariants of Dynamo's formula (see the top of this file).
// Invariant: when decaying, minActive must be set to the smallest ActivePrefillTokens among the
// partition's ranks before cost is called; otherwise it is unused.
type dynamoTerms struct {
	w         weights
	invBS     float64
	isl       uint64
	reqBlocks float64
	decaying  bool
	minActive uint64
	nseq      int
	// simple: prefill is tracked and nothing decays (cost's inlined case); bs, scale, credit and
	// reqWeight copy the block size and weights for it.
	simple                   bool
	bs                       uint64
	scale, credit, reqWeight float64
}

func newDynamoTerms(n *normalized, blockSize uint32, w weights) dynamoTerms {
	reqBlocks := float64(n.requestBlocks(blockSize))
	k := dynamoTerms{
		w: w, invBS: 1 / float64(blockSize), isl: n.isl, reqBlocks: reqBlocks,
		decaying: w.trackPrefill && w.decay > 0 && reqBlocks > 0, minActive: math.MaxUint64, nseq: len(n.seq),
		bs: uint64(blockSize), scale: w.scale, credit: w.credit, reqWeight: w.reqWeight,
	}
	k.simple = w.trackPrefill && !k.decaying
	return k
}

// cost is one rank's cost from its tiered overlap (blocks), booked prefix (blocks) and load. The
// operations and their order are the formula's; any change here changes decisions.
//
// Rounding: every product that is added to something is wrapped in an explicit float64
// conversion, which (Go spec, "Arithmetic operators") forbids fusing it into a multiply-add. On
// amd64 (no FMA at the default GOAMD64=v1) this changes nothing; on architectures with FMA it
// keeps costs — and therefore decisions — identical across architectures and across the call
// sites that inline simpleCost.
func (k *dynamoTerms) cost(dev, host, disk int32, booked int, l *load.RankLoad) float64 {
	if host|disk == 0 && k.simple {
		return k.simpleCost(dev, booked, l.ActivePrefillTokens, l.ActiveBlocks, l.ActiveRequests)
	}
	return k.costGeneral(dev, host, disk, booked, l.ActivePrefillTokens, l.ActiveBlocks, l.ActiveRequests)
}

// simpleCost is cost in the common case — prefill tracked, no decay, device-tier overlap only —
// with exactly the operations costGeneral performs for it. It is small enough to inline into the
// per-rank loops; callers check host|disk == 0 && k.simple.
func (k *dynamoTerms) simpleCost(dev int32, booked int, prefill, blocks uint64, requests int) float64 {
	rawPrefill := float64(prefill + max(k.isl, uint64(dev)*k.bs))
	credit := float64(float64(dev) * k.credit)
	decodeCost := float64(blocks) + float64(k.nseq-booked)
	return float64(k.scale*max(0, float64(rawPrefill*k.invBS)-credit)) + decodeCost + float64(k.reqWeight*float64(requests))
}

// costGeneral is cost for every case, from the rank's active prefill tokens, active blocks and
// active requests.
func (k *dynamoTerms) costGeneral(dev, host, disk int32, booked int, prefill, blocks uint64, requests int) float64 {
	w := &k.w
	var rawPrefill float64
	if w.trackPrefill {
		var cached uint64
		if host == 0 && disk == 0 {
			cached = uint64(dev) * k.bs
		} else {
			cached = cachedTokensOf(dev, host, disk, k.bs, w)
		}
		rawPrefill = float64(prefill + max(k.isl, cached))
	}
	credit := float64(float64(dev) * w.credit)
	if k.decaying {
		rel := float64(float64(prefill-k.minActive) * k.invBS)
		credit /= 1 + float64(w.decay*rel)/k.reqBlocks
	}
	if host != 0 || disk != 0 {
		credit += float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	}
	decodeCost := float64(blocks) + float64(k.nseq-booked)
	return float64(w.scale*max(0, float64(rawPrefill*k.invBS)-credit)) + decodeCost + float64(w.reqWeight*float64(requests))
}

// cachedTokens is the effective cached token count of a candidate (never negative).
func cachedTokens(s *scored, bs uint64, w weights) uint64 {
	return cachedTokensOf(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, bs, &w)
}

// cachedTokensOf is cachedTokens from the three tier counts.
func cachedTokensOf(dev, host, disk int32, bs uint64, w *weights) uint64 {
	eff := float64(dev) + float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	return uint64(math.Round(max(0, eff*float64(bs))))
}
