package scoretest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// Cases is the number of generated inputs per check.
const Cases = 200

// fixture is one generated selection: a context and its candidates.
type fixture struct {
	ctx   engine.SelectionContext
	cands []engine.Candidate
	loads []load.RankLoad
}

// gen builds a deterministic random fixture with n candidates.
func gen(rng *rand.Rand, n int) *fixture {
	bs := uint32([]int{4, 16, 64, 512}[rng.IntN(4)])
	blocks := rng.IntN(64)
	f := &fixture{
		ctx: engine.SelectionContext{
			Partition: engine.PartitionKey{Model: "m", Group: "g"}, BlockSize: bs,
			ISL: uint64(blocks)*uint64(bs) + uint64(rng.IntN(int(bs))) + 1, Blocks: blocks,
			SessionID: fmt.Sprintf("s%d", rng.IntN(5)), PolicyClass: []string{"", "gold"}[rng.IntN(2)],
			Booking: rng.IntN(2) == 0, Temperature: []float64{0, 0.5}[rng.IntN(2)],
		},
		cands: make([]engine.Candidate, n),
		loads: make([]load.RankLoad, n),
	}
	sid := f.ctx.SessionID
	f.ctx.Session = &engine.SessionContext{SessionID: &sid, AgentHeaders: map[string][]string{"x-zone": {[]string{"a", "b", "c"}[rng.IntN(3)]}}}
	f.ctx.AgentHeaders = f.ctx.Session.AgentHeaders
	f.ctx.MinActivePrefillTokens = math.MaxUint64
	for i := range f.cands {
		dev := rng.IntN(blocks + 1)
		host := rng.IntN(blocks - dev + 1)
		disk := rng.IntN(blocks - dev - host + 1)
		f.loads[i] = load.RankLoad{
			ActivePrefillTokens: uint64(rng.IntN(50_000)), ActiveBlocks: uint64(rng.IntN(5000)),
			ActiveRequests: rng.IntN(100), PendingPrefills: rng.IntN(10),
		}
		f.loads[i].PrefillSquares = f.loads[i].ActivePrefillTokens * f.loads[i].ActivePrefillTokens / uint64(max(1, f.loads[i].PendingPrefills))
		o := kvwire.Owner{Worker: uint64(i/4 + 1), Rank: uint32(i % 4)}
		f.loads[i].Owner.Worker, f.loads[i].Owner.Rank = o.Worker, o.Rank
		f.cands[i] = engine.Candidate{
			Owner: o, DeviceBlocks: int32(dev), HostExtBlocks: int32(host), DiskExtBlocks: int32(disk),
			BookedPrefixBlocks: rng.IntN(blocks + 1),
			Worker: &engine.WorkerInfo{
				ID: o.Worker, ModelName: "m", RoutingGroup: "g", Endpoint: fmt.Sprintf("http://w%d", o.Worker),
				Taints:          map[string]struct{}{"gpu": {}},
				TopologyDomains: map[string]string{"zone": []string{"a", "b", "c"}[int(o.Worker)%3]},
			},
		}
		f.ctx.MinActivePrefillTokens = min(f.ctx.MinActivePrefillTokens, f.loads[i].ActivePrefillTokens)
	}
	for i := range f.cands {
		f.cands[i].Load = &f.loads[i]
	}
	return f
}

// clone deep-copies a fixture (maps included) so mutation can be detected.
func (f *fixture) clone() *fixture {
	g := &fixture{ctx: f.ctx, cands: make([]engine.Candidate, len(f.cands)), loads: append([]load.RankLoad(nil), f.loads...)}
	if f.ctx.Session != nil {
		s := *f.ctx.Session
		sid := *s.SessionID
		s.SessionID = &sid
		s.AgentHeaders = cloneHeaders(s.AgentHeaders)
		g.ctx.Session, g.ctx.AgentHeaders = &s, s.AgentHeaders
	}
	for i, c := range f.cands {
		w := *c.Worker
		w.Taints = make(map[string]struct{}, len(c.Worker.Taints))
		for k := range c.Worker.Taints {
			w.Taints[k] = struct{}{}
		}
		w.TopologyDomains = make(map[string]string, len(c.Worker.TopologyDomains))
		for k, v := range c.Worker.TopologyDomains {
			w.TopologyDomains[k] = v
		}
		c.Worker = &w
		c.Load = &g.loads[i]
		g.cands[i] = c
	}
	return g
}

func cloneHeaders(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// scribble overwrites every argument in place, as the engine does when it reuses scratch memory.
func (f *fixture) scribble() {
	f.ctx.ISL, f.ctx.Blocks, f.ctx.SessionID = 1, 0, "scribbled"
	if f.ctx.Session != nil {
		for k := range f.ctx.Session.AgentHeaders {
			f.ctx.Session.AgentHeaders[k] = []string{"scribbled"}
		}
	}
	for i := range f.cands {
		f.cands[i].DeviceBlocks, f.cands[i].BookedPrefixBlocks = -1, -1
		f.loads[i] = load.RankLoad{ActivePrefillTokens: math.MaxUint32}
		for k := range f.cands[i].Worker.TopologyDomains {
			f.cands[i].Worker.TopologyDomains[k] = "scribbled"
		}
	}
}

// equalFixtures compares fixtures by value (pointers followed).
func equalFixtures(a, b *fixture) bool {
	if !reflect.DeepEqual(a.ctx, b.ctx) || !reflect.DeepEqual(a.loads, b.loads) || len(a.cands) != len(b.cands) {
		return false
	}
	for i := range a.cands {
		ca, cb := a.cands[i], b.cands[i]
		if !reflect.DeepEqual(*ca.Worker, *cb.Worker) || *ca.Load != *cb.Load {
			return false
		}
		ca.Worker, cb.Worker, ca.Load, cb.Load = nil, nil, nil, nil
		if ca != cb {
			return false
		}
	}
	return true
}

// Scorer runs the conformance checks on s.
func Scorer(t testing.TB, s engine.Scorer) {
	t.Helper()
	rng := rand.New(rand.NewPCG(42, 7))
	for k := range Cases {
		f := gen(rng, 1+rng.IntN(16))
		ref := f.clone()
		first := make([]float64, len(f.cands))
		for i := range f.cands {
			first[i] = s.Score(&f.ctx, &f.cands[i])
			if math.IsNaN(first[i]) || math.IsInf(first[i], 0) {
				t.Fatalf("case %d cand %d: score %v is not finite", k, i, first[i])
			}
		}
		if !equalFixtures(f, ref) {
			t.Fatalf("case %d: Score modified its arguments", k)
		}
		// Reverse order on a fresh copy: same scores (order independence, determinism).
		g := ref.clone()
		for i := len(g.cands) - 1; i >= 0; i-- {
			if got := s.Score(&g.ctx, &g.cands[i]); got != first[i] {
				t.Fatalf("case %d cand %d: score %v, then %v on identical input (scored in reverse order)", k, i, first[i], got)
			}
		}
		// Scribble over the first arguments; fresh arguments must still score the same.
		f.scribble()
		h := ref.clone()
		for i := range h.cands {
			if got := s.Score(&h.ctx, &h.cands[i]); got != first[i] {
				t.Fatalf("case %d cand %d: score changed to %v after earlier arguments were overwritten (retained buffer?)", k, i, got)
			}
		}
	}
	// Concurrency: private fixtures per goroutine.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 99))
			for range 50 {
				f := gen(r, 8)
				for i := range f.cands {
					_ = s.Score(&f.ctx, &f.cands[i])
				}
			}
		}()
	}
	wg.Wait()
	f := gen(rand.New(rand.NewPCG(5, 5)), 8)
	allocs := testing.AllocsPerRun(100, func() { _ = s.Score(&f.ctx, &f.cands[0]) })
	t.Logf("scorer allocations per call: %v", allocs)
}

// Picker runs the conformance checks on p.
func Picker(t testing.TB, p engine.Picker) {
	t.Helper()
	rng := rand.New(rand.NewPCG(43, 8))
	for k := range Cases {
		f := gen(rng, 1+rng.IntN(16))
		costs := rng.Perm(len(f.cands)) // distinct costs
		build := func(g *fixture, order []int) []engine.ScoredCandidate {
			out := make([]engine.ScoredCandidate, len(order))
			for i, j := range order {
				out[i] = engine.ScoredCandidate{Candidate: &g.cands[j], Cost: float64(costs[j])}
			}
			return out
		}
		ref := f.clone()
		id := make([]int, len(f.cands))
		for i := range id {
			id[i] = i
		}
		sc := build(f, id)
		choice := p.Pick(&f.ctx, sc, rand.New(rand.NewPCG(1, 1)))
		if choice < -1 || choice >= len(sc) {
			t.Fatalf("case %d: Pick returned %d for %d candidates", k, choice, len(sc))
		}
		if !equalFixtures(f, ref) {
			t.Fatalf("case %d: Pick modified its arguments", k)
		}
		if again := p.Pick(&f.ctx, build(f, id), rand.New(rand.NewPCG(1, 1))); again != choice {
			t.Fatalf("case %d: Pick is not deterministic for a fixed seed: %d then %d", k, choice, again)
		}
		if choice < 0 {
			continue
		}
		want := sc[choice].Owner
		perm := rng.Perm(len(f.cands))
		g := ref.clone()
		psc := build(g, perm)
		if got := p.Pick(&g.ctx, psc, rand.New(rand.NewPCG(1, 1))); got < 0 || psc[got].Owner != want {
			t.Fatalf("case %d: Pick depends on candidate order (chose %v, then index %d of a permutation)", k, want, got)
		}
	}
}
