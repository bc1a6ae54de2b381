package engine

// kvselectPolicy is kvselect's cost function (PolicyKVSelect), dispatched to the terms of
// kvselect_cost.go: kvselectCosts on the general path, kvselectTerms.costOf per rank on the
// fast path. This file is only that glue; the cost itself lives in kvselect_*.go.
type kvselectPolicy struct{}

func (kvselectPolicy) costs(cs []scored, n normalized, blockSize uint32, w weights) {
	kvselectCosts(cs, &n, blockSize, w)
}

func (kvselectPolicy) fast(e *Engine, sel *selection) {
	f, p, w := &e.scratch.fast, sel.p, sel.w
	tr, ov, booked, cost := p.tracker, f.ov, f.booked, f.cost
	k := newKVSelectTerms(&sel.norm, p.blockSize, w)
	k.observeTracker(tr) // O(1) (kvselect_partition.go)
	ent := e.entriesOf(p, w)
	invMax := 0.0
	evict, capacity, decode := w.eviction > 0, w.needsCapacity(), w.decodeCtx > 0
	cold := evict && w.coldShare > 0 && tr.HeatWindow() > 0
	if evict {
		for i, n := range ent {
			k.observeEntries(n, p.cands[i].fillScale)
		}
		invMax = k.invMax()
		if cold {
			for i := range cost {
				k.observeHeat(tr.CacheHeatAt(i))
			}
			k.settleHeat(len(cost))
		}
	}
	pick, draw, elig := f.pick, f.draw, f.mask
	// With cache stickiness the picker needs every cost first (kvselect_stick.go): the rule
	// compares ranks outside the sticky set with its best. Otherwise the picker is fused into
	// the cost loop. The second pass was within noise on BenchmarkSelect (512 ranks, six runs
	// alternated with the code before on a loaded machine: 23.0 → 24.9 µs, ±16–26 %, p = 0.70;
	// p50 16.9 → 16.4 µs; 5 allocations either way).
	st, stick := newStickiness(w.stickShare, &sel.norm, p.blockSize)
	stick = stick && draw
	offer := draw && !stick
	for i := range cost {
		prefill, active, requests, pending, squares := tr.CountersAt(i)
		o := &ov[i]
		occ := 0.0
		if evict {
			occ = occupancy(ent[i], p.cands[i].fillScale, invMax)
			if cold {
				occ *= k.coldFactor(tr.CacheHeatAt(i))
			}
		}
		invCap, invBudget, contexts := 0.0, 0.0, uint64(0)
		if capacity {
			invCap = p.cands[i].invCap
		}
		if decode {
			invBudget, contexts = p.cands[i].invBudget, tr.ContextTokensAt(i)
		}
		c := k.costOf(o[0], o[1], o[2]+o[3], int(booked[i]), occ, tr.SpeedAt(i), prefill, squares, tr.CrossAt(i), pending, requests, active, contexts, invCap, invBudget)
		cost[i] = c
		if offer && (elig == nil || elig[i]) {
			pick.offer(i, c)
		}
	}
	if stick {
		away := f.awayMask(p, st, elig)
		sel.stuck = away != nil
		for i, c := range cost {
			if (elig == nil || elig[i]) && (away == nil || !away[i]) {
				pick.offer(i, c)
			}
		}
	}
	f.pick = pick
}
