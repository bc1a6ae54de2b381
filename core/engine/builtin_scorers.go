package engine

// The built-in cost functions as Scorers, for programs that replace the built-in cost
// (Scoring.ReplaceBuiltin) and want to keep it as one term among their own. With weight 1 and no
// other scorer they reproduce the built-in decisions exactly (before preferred-taint scaling,
// which the engine applies to the built-in cost only).

// DynamoScorer returns Dynamo's cost formula (spec §5.3) with cfg's weights: the per-rank
// arithmetic of the built-in policy (policy_dynamo.go), from the context's partition-wide terms.
func DynamoScorer(cfg Config) Scorer {
	w := weightsOf(&cfg)
	return ScorerFunc(func(ctx *SelectionContext, c *Candidate) float64 {
		n := normalized{isl: ctx.ISL}
		k := newDynamoTerms(&n, ctx.BlockSize, w)
		k.minActive, k.nseq = ctx.MinActivePrefillTokens, ctx.Blocks
		return k.cost(c.DeviceBlocks, c.HostExtBlocks, c.DiskExtBlocks, c.BookedPrefixBlocks, c.Load)
	})
}

// KVSelectScorer returns kvselect's cost function (kvselect_cost.go) with cfg's parameters.
func KVSelectScorer(cfg Config) Scorer {
	w := weightsOf(&cfg)
	w.policy = kvselectPolicy{}
	return ScorerFunc(func(ctx *SelectionContext, c *Candidate) float64 { return kvselectScore(w, ctx, c) })
}

// kvselectScore is KVSelectScorer's score of c.
func kvselectScore(w weights, ctx *SelectionContext, c *Candidate) float64 {
	// The partition-wide terms come from the selection's ranks (ctx.fleet), as in the built-in
	// cost; a context built outside a selection has none, and then c is priced alone.
	n := normalized{isl: ctx.ISL}
	if w.centralSpeed && !w.fixedSpeed {
		w.central = ctx.central
	}
	w.reordered = w.reorderSlowdown > 0 && ctx.reordered
	t := newKVSelectTerms(&n, ctx.BlockSize, w)
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
	t.observeScored(fleet)
	s := fleet[self]
	s.Candidate = *c
	return t.scoredCost(&s)
}
