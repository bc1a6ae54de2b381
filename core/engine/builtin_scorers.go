package engine

import "math"

// The built-in cost functions as Scorers, for programs that replace the built-in cost
// (Scoring.ReplaceBuiltin) and want to keep it as one term among their own. With weight 1 and no
// other scorer they reproduce the built-in decisions exactly (before preferred-taint scaling,
// which the engine applies to the built-in cost only).

// DynamoScorer returns Dynamo's cost formula (spec §5.3) with cfg's weights.
func DynamoScorer(cfg Config) Scorer {
	return dynamoScorer{credit: cfg.OverlapScoreCredit, decay: cfg.OverlapScoreCreditDecay, scale: cfg.PrefillLoadScale,
		host: cfg.HostCacheHitWeight, disk: cfg.DiskCacheHitWeight, reqWeight: cfg.DecodeActiveRequestWeight,
		track: cfg.TrackPrefillTokens}
}

type dynamoScorer struct {
	credit, decay, scale, host, disk, reqWeight float64
	track                                       bool
}

func (d dynamoScorer) Score(ctx *SelectionContext, c *Candidate) float64 {
	bs := float64(ctx.BlockSize)
	w := weights{credit: d.credit, decay: d.decay, scale: d.scale, host: d.host, disk: d.disk, reqWeight: d.reqWeight, trackPrefill: d.track}
	s := scored{Candidate: *c}
	n := normalized{isl: ctx.ISL, seq: nil}
	var rawPrefill float64
	if d.track {
		cached := cachedTokens(&s, uint64(ctx.BlockSize), w)
		rawPrefill = float64(c.Load.ActivePrefillTokens + max(ctx.ISL, cached))
	}
	decay := 1.0
	if reqBlocks := float64(n.requestBlocks(ctx.BlockSize)); d.track && d.decay > 0 && reqBlocks > 0 {
		decay = 1 / (1 + d.decay*(float64(c.Load.ActivePrefillTokens-ctx.MinActivePrefillTokens)/bs)/reqBlocks)
	}
	credit := d.credit*decay*float64(c.DeviceBlocks) + d.host*float64(c.HostExtBlocks) + d.disk*float64(c.DiskExtBlocks)
	decodeCost := float64(c.Load.ActiveBlocks) + float64(ctx.Blocks-c.BookedPrefixBlocks)
	return d.scale*math.Max(0, rawPrefill/bs-credit) + decodeCost + d.reqWeight*float64(c.Load.ActiveRequests)
}

// KVSelectScorer returns kvselect's cost function (kvselect_cost.go) with cfg's parameters.
func KVSelectScorer(cfg Config) Scorer {
	return kvselectScorer{w: weights{credit: cfg.OverlapScoreCredit, host: cfg.HostCacheHitWeight, disk: cfg.DiskCacheHitWeight,
		reqWeight: cfg.DecodeActiveRequestWeight, modelA: cfg.PrefillModelA, modelB: cfg.PrefillModelB, modelC: cfg.PrefillModelC,
		affinity: cfg.AffinityWeight, affinityQueue: cfg.AffinityQueueMS, kvselect: true,
		missWork: cfg.MissWorkWeight, eviction: cfg.EvictionWeight, pressure: cfg.KVPressureWeight, decodeCtx: cfg.DecodeContextWeight, fixedSpeed: cfg.FixedPrefillModel, robust: cfg.RobustKVSelect}}
}

type kvselectScorer struct{ w weights }

func (k kvselectScorer) Score(ctx *SelectionContext, c *Candidate) float64 {
	// The partition-wide terms come from the selection's ranks (ctx.fleet), as in the built-in
	// cost; a context built outside a selection has none, and then c is priced alone.
	n := normalized{isl: ctx.ISL}
	t := newKVSelectTerms(&n, ctx.BlockSize, k.w)
	fleet := ctx.fleet
	self := -1
	for i := range fleet {
		if &fleet[i].Candidate == c {
			self = i
		}
	}
	if self < 0 {
		fleet, self = []scored{{Candidate: *c}}, 0
	}
	for i := range fleet {
		t.observeEntries(fleet[i].entries)
		t.observeRank(fleet[i].Load.Speed, fleet[i].Load.PendingPrefills)
	}
	s := fleet[self]
	s.Candidate = *c
	return t.scoredCost(&s)
}
