package engine

// Tests around the fast path that do not need the twin-engine harness (fast_test.go) as their
// driver: rank-name tabulation, the exported built-in scorers against both paths, and the
// general path's ordinal scoring against its merge-based fallback.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
)

// TestRankNames: the partition's rank-name table answers strconv's decimal form for every rank,
// in and out of the tabulated span, for dense and sparse candidate sets.
func TestRankNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []WorkerSpec
	}{
		{"dense", []WorkerSpec{spec(1, dp(0, 4)), spec(2, dp(4, 4))}},
		{"high", []WorkerSpec{spec(1, dp(4_000_000_000, 3))}},
		{"sparse", []WorkerSpec{spec(1, dp(0, 2)), spec(2, dp(1_000_000, 2))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, approxConfig()) // no endpoint checks: the test helper derives ports from ranks
			for _, s := range tc.specs {
				mustUpsert(t, e, s)
			}
			p := e.parts[defKey]
			probe := []uint32{0, 1, 3, 4, 7, 8, 99, 100, 1_000_001, 4_000_000_000, 4_000_000_002, math.MaxUint32}
			for _, c := range p.cands {
				probe = append(probe, c.rank, c.rank+1)
			}
			for _, r := range probe {
				if got, want := p.rankName(r), fmt.Sprint(r); got != want {
					t.Fatalf("rankName(%d) = %q, want %q", r, got, want)
				}
			}
			if tc.name == "sparse" && len(p.rankNames) != 0 {
				t.Fatalf("sparse ranks tabulated %d names", len(p.rankNames))
			}
			if tc.name != "sparse" && len(p.rankNames) == 0 {
				t.Fatalf("dense ranks not tabulated")
			}
		})
	}
}

// TestBuiltinScorersMatchBothPaths: the exported built-in scorers, used as the only cost
// (ReplaceBuiltin), reproduce the built-in cost of the general path and of the fast path rank by
// rank (within 1e-9 relative: the scorers evaluate the same formula outside the engine's loop),
// and the three engines make the same decisions. TestBuiltinScorersReproduceBuiltinCost checks
// the same against an engine that now takes the fast path; this keeps the general path's
// per-rank costs covered too.
func TestBuiltinScorersMatchBothPaths(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), KVSelectDefaults()} {
		scorer := DynamoScorer(cfg)
		if cfg.Policy == PolicyKVSelect {
			scorer = KVSelectScorer(cfg)
		}
		fast := scoringEngine(t, cfg, Scoring{})
		general := scoringEngine(t, cfg, Scoring{})
		general.scratch.fast.disabled = true
		custom := scoringEngine(t, cfg, Scoring{ReplaceBuiltin: true, Scorers: []WeightedScorer{{Name: "builtin", Weight: 1, Scorer: scorer}}})
		rng := rand.New(rand.NewPCG(9, 9))
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a)) }
		compared := 0
		for i := range 200 {
			tokens := toks(rng.IntN(4)*4, 4+rng.IntN(20))
			id := fmt.Sprint("r", i)
			hits := fast.scratch.fast.hits
			rf, errF := fast.SelectAndReserve(selReq(id, tokens), t0)
			rg, errG := general.SelectAndReserve(selReq(id, tokens), t0)
			rc, errC := custom.SelectAndReserve(selReq(id, tokens), t0)
			if (errF == nil) != (errG == nil) || (errG == nil) != (errC == nil) {
				t.Fatalf("%s step %d: errors differ: %v / %v / %v", cfg.Policy, i, errF, errG, errC)
			}
			if errF != nil {
				continue
			}
			if fast.scratch.fast.hits == hits {
				t.Fatalf("%s step %d: the fast engine took the general path", cfg.Policy, i)
			}
			if rf.WorkerID != rg.WorkerID || rf.DPRank != rg.DPRank || rg.WorkerID != rc.WorkerID || rg.DPRank != rc.DPRank {
				t.Fatalf("%s step %d: fast chose %d, general %d, scorer %d", cfg.Policy, i, rf.WorkerID, rg.WorkerID, rc.WorkerID)
			}
			gc, cc := general.scratch.cands, custom.scratch.cands
			if len(gc) != len(cc) || len(gc) != len(fast.scratch.fast.cost) {
				t.Fatalf("%s step %d: %d / %d / %d candidates", cfg.Policy, i, len(fast.scratch.fast.cost), len(gc), len(cc))
			}
			for j := range gc {
				if fc := fast.scratch.fast.cost[j]; math.Float64bits(fc) != math.Float64bits(gc[j].cost) || !near(gc[j].cost, cc[j].cost) {
					t.Fatalf("%s step %d cand %d: fast %v, general %v, scorer %v", cfg.Policy, i, j, fc, gc[j].cost, cc[j].cost)
				}
				compared++
			}
			if rng.IntN(3) == 0 {
				_, _, _ = fast.Free(id), general.Free(id), custom.Free(id)
			}
		}
		if compared < 300 {
			t.Fatalf("%s: only %d costs compared", cfg.Policy, compared)
		}
	}
}

// TestScoreOrdinalMatchesMerged: the general path's score reads candidates by ordinal; its
// fallback for a broken partition invariant (scoreMerged: per-owner loads, merged Match and
// ActivePrefix answers) must produce the same candidates and costs. Random states from the
// differential workload, both cost policies.
func TestScoreOrdinalMatchesMerged(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), KVSelectDefaults()} {
		tw := newTwin(t, cfg, 3)
		compared := 0
		for round := range 6 {
			tw.run(150)
			e := tw.full
			p := e.parts[defKey]
			if p == nil || !p.ready() {
				continue
			}
			w := e.weightsFor(nil)
			for q := range 20 {
				tokens := tw.prompt()
				if len(tokens) == 0 {
					continue
				}
				prompt := tokenPrompt(tokens)
				n, err := e.normalize(p, &prompt, w.assumeReuse, true)
				noErr(t, err)
				if !p.ordinalsValid() {
					t.Fatalf("round %d: ordinals invalid on a consistent partition", round)
				}
				got := slices.Clone(e.score(p, &n, w))
				gotLoads := make([]load.RankLoad, len(got))
				for i := range got {
					gotLoads[i] = *got[i].Load
				}
				p.ordOK = false // what a broken invariant looks like to score
				want := e.score(p, &n, w)
				p.ordOK = true
				if len(got) != len(want) {
					t.Fatalf("round %d query %d: %d vs %d candidates", round, q, len(got), len(want))
				}
				for i := range want {
					g, m := got[i], want[i]
					if gotLoads[i] != *m.Load || g.Owner != m.Owner || g.DeviceBlocks != m.DeviceBlocks || g.HostExtBlocks != m.HostExtBlocks ||
						g.DiskExtBlocks != m.DiskExtBlocks || g.BookedPrefixBlocks != m.BookedPrefixBlocks || g.w != m.w ||
						g.eligible != m.eligible || math.Float64bits(g.cost) != math.Float64bits(m.cost) {
						t.Fatalf("round %d query %d rank %d: ordinal %+v load %+v, merged %+v load %+v", round, q, i, g, gotLoads[i], m, *m.Load)
					}
					compared++
				}
			}
		}
		if compared < 500 {
			t.Fatalf("%s: only %d candidates compared", cfg.Policy, compared)
		}
	}
}
