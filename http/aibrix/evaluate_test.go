package aibrix

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// fakeBackend maps candidate ids to rank loads for one model.
type fakeBackend struct {
	model string
	loads map[string][]RankLoad
	calls int
}

func (f *fakeBackend) CandidateLoad(model, id string) ([]RankLoad, bool) {
	f.calls++
	if model != f.model {
		return nil, false
	}
	r, ok := f.loads[id]
	return r, ok
}

func mustPolicy(t testing.TB, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

func cands(specs ...string) []Candidate {
	out := make([]Candidate, 0, len(specs))
	for _, id := range specs {
		out = append(out, Candidate{ID: id, Ports: []int{8000}})
	}
	return out
}

func TestEvaluateTable(t *testing.T) {
	zonePolicy := mustPolicy(t, `
requirements:
- {models: [premium], attribute: gpu, values: [h100]}
- {context: {tier: premium}, attribute: gpu, values: [h100]}
preferences:
- {attribute: zone, values: [z1], weight: 2}
deny:
- {context: {tier: blocked}, reason: Compliance}
`)
	withAttrs := func(c Candidate, kv ...string) Candidate {
		for i := 0; i+1 < len(kv); i += 2 {
			c.Attributes = append(c.Attributes, Attribute{kv[i], kv[i+1]})
		}
		return c
	}
	withRun := func(c Candidate, n int64) Candidate {
		c.Metrics.RunningRequests, c.Metrics.HasRunningRequests = n, true
		return c
	}
	c := func(id string, ports ...int) Candidate {
		if len(ports) == 0 {
			ports = []int{8000}
		}
		return Candidate{ID: id, Ports: ports}
	}
	tests := []struct {
		name    string
		req     Request
		pol     *Policy
		backend Backend
		sticky  *Binding
		want    Decision
	}{
		{name: "no policy, equal load, smallest id wins",
			req:  Request{Model: "m", PolicyMode: Advisory, Candidates: cands("ns/b", "ns/a", "ns/c")},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "running requests decide",
			req:  Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{withRun(c("ns/a"), 5), withRun(c("ns/b"), 1)}},
			want: Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "kv usage decides",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{
				{ID: "ns/a", Ports: []int{8000}, Metrics: Metrics{KVCacheUsage: 0.9, HasKVCacheUsage: true}},
				{ID: "ns/b", Ports: []int{8000}, Metrics: Metrics{KVCacheUsage: 0.1, HasKVCacheUsage: true}}}},
			want: Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "kvselect load beats gateway count when larger",
			req:     Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{withRun(c("ns/a"), 1), withRun(c("ns/b"), 2)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {{Rank: 0, ActiveRequests: 7}}}},
			want:    Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "backend of another model is ignored",
			req:     Request{Model: "other", PolicyMode: Advisory, Candidates: []Candidate{withRun(c("ns/a"), 1), withRun(c("ns/b"), 2)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {{Rank: 0, ActiveRequests: 7}}}},
			want:    Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "ports map to ranks: least-loaded rank's port",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{c("ns/a", 8000, 8001, 8002)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {
				{Rank: 0, ActiveRequests: 3}, {Rank: 1, ActiveRequests: 1}, {Rank: 2, ActiveRequests: 1}}}},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8001}, Reason: ReasonLeastLoaded}},
		{name: "rank prefill tokens count",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{c("ns/a", 8000, 8001)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {
				{Rank: 0, ActivePrefillTokens: 4096}, {Rank: 1, ActiveDecodeBlocks: 64}}}},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8001}, Reason: ReasonLeastLoaded}},
		{name: "rank count mismatch: smallest port",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{c("ns/a", 8000, 8001, 8002)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {
				{Rank: 0, ActiveRequests: 3}, {Rank: 1}}}},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "unsorted ranks: smallest port",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{c("ns/a", 8000, 8001)}},
			backend: &fakeBackend{model: "m", loads: map[string][]RankLoad{"ns/a": {
				{Rank: 1, ActiveRequests: 3}, {Rank: 0}}}},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "capacity: more ports divide the load",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{
				withRun(c("ns/a", 8000, 8001, 8002, 8003), 6), withRun(c("ns/b"), 2)}},
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "requirement by model filters",
			req: Request{Model: "premium", PolicyMode: Advisory, Candidates: []Candidate{
				withAttrs(c("ns/a"), "gpu", "a100"), withAttrs(withRun(c("ns/b"), 9), "gpu", "h100")}},
			pol:  zonePolicy,
			want: Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "requirement by context filters",
			req: Request{Model: "m", PolicyMode: Advisory, PolicyContext: Attributes{{"tier", "premium"}}, Candidates: []Candidate{
				withAttrs(c("ns/a"), "gpu", "a100"), withAttrs(withRun(c("ns/b"), 9), "gpu", "h100")}},
			pol:  zonePolicy,
			want: Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "requirement out of scope does not filter",
			req: Request{Model: "m", PolicyMode: Advisory, PolicyContext: Attributes{{"tier", "gold"}}, Candidates: []Candidate{
				withAttrs(c("ns/a"), "gpu", "a100"), withAttrs(withRun(c("ns/b"), 9), "gpu", "h100")}},
			pol:  zonePolicy,
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "no eligible advisory: NoDecision",
			req:  Request{Model: "premium", PolicyMode: Advisory, Candidates: []Candidate{withAttrs(c("ns/a"), "gpu", "a100"), c("ns/b")}},
			pol:  zonePolicy,
			want: Decision{Decision: NoDecision, Reason: DefaultNoMatchReason}},
		{name: "no eligible authoritative: Denied",
			req:  Request{Model: "premium", PolicyMode: Authoritative, Candidates: []Candidate{withAttrs(c("ns/a"), "gpu", "a100")}},
			pol:  zonePolicy,
			want: Decision{Decision: Denied, Reason: DefaultNoMatchReason}},
		{name: "preference outweighs one request",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{
				withRun(c("ns/a"), 0), withAttrs(withRun(c("ns/b"), 1), "zone", "z1")}},
			pol:  zonePolicy,
			want: Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
		{name: "preference loses to three requests",
			req: Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{
				withRun(c("ns/a"), 0), withAttrs(withRun(c("ns/b"), 3), "zone", "z1")}},
			pol:  zonePolicy,
			want: Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "deny authoritative",
			req:  Request{Model: "m", PolicyMode: Authoritative, PolicyContext: Attributes{{"tier", "blocked"}}, Candidates: cands("ns/a")},
			pol:  zonePolicy,
			want: Decision{Decision: Denied, Reason: "Compliance"}},
		{name: "deny advisory becomes NoDecision",
			req:  Request{Model: "m", PolicyMode: Advisory, PolicyContext: Attributes{{"tier", "blocked"}}, Candidates: cands("ns/a")},
			pol:  zonePolicy,
			want: Decision{Decision: NoDecision, Reason: "Compliance"}},
		{name: "sticky binding wins over load",
			req:    Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{withRun(c("ns/a"), 0), withRun(c("ns/b", 8000, 9000), 5)}},
			sticky: &Binding{CandidateID: "ns/b", Port: 9000},
			want:   Decision{Decision: Selected, Target: Target{"ns/b", 9000}, Reason: ReasonSessionAffinity}},
		{name: "sticky port gone: candidate kept, port rechosen",
			req:    Request{Model: "m", PolicyMode: Advisory, Candidates: []Candidate{c("ns/a"), c("ns/b", 8000, 8001)}},
			sticky: &Binding{CandidateID: "ns/b", Port: 9000},
			want:   Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonSessionAffinity}},
		{name: "sticky candidate gone: least loaded",
			req:    Request{Model: "m", PolicyMode: Advisory, Candidates: cands("ns/a", "ns/c")},
			sticky: &Binding{CandidateID: "ns/b", Port: 8000},
			want:   Decision{Decision: Selected, Target: Target{"ns/a", 8000}, Reason: ReasonLeastLoaded}},
		{name: "sticky candidate ineligible: not used",
			req:    Request{Model: "premium", PolicyMode: Authoritative, Candidates: []Candidate{c("ns/a"), withAttrs(c("ns/b"), "gpu", "h100")}},
			pol:    zonePolicy,
			sticky: &Binding{CandidateID: "ns/a", Port: 8000},
			want:   Decision{Decision: Selected, Target: Target{"ns/b", 8000}, Reason: ReasonLeastLoaded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(&tt.req, tt.pol, tt.backend, tt.sticky)
			if got != tt.want {
				t.Fatalf("Evaluate = %+v, want %+v", got, tt.want)
			}
			if !got.Decision.Legal(tt.req.PolicyMode) {
				t.Fatalf("illegal decision %s for %s", got.Decision, tt.req.PolicyMode)
			}
		})
	}
}

func TestEvaluateBindsSessions(t *testing.T) {
	pol := mustPolicy(t, "sessionKey: sid\n")
	req := Request{Model: "m", PolicyMode: Advisory, PolicyContext: Attributes{{"sid", "s1"}}, Candidates: cands("ns/a")}
	if d := Evaluate(&req, pol, nil, nil); !d.BindSession {
		t.Fatalf("session request must ask to bind: %+v", d)
	}
	req.PolicyContext = Attributes{{"other", "s1"}}
	if d := Evaluate(&req, pol, nil, nil); d.BindSession {
		t.Fatalf("request without the session attribute must not bind: %+v", d)
	}
}

// naiveDecide is an independent, obviously-correct reference: compute every
// candidate's cost from the documented formula, sort by (cost, id), take
// the first; ports by brute force over the rank mapping rule.
func naiveDecide(req *Request, pol *Policy, loads map[string][]RankLoad) Decision {
	w := pol.Load
	for _, d := range pol.Deny {
		if scopeOK(d.Scope, req) {
			if req.PolicyMode == Authoritative {
				return Decision{Decision: Denied, Reason: d.Reason}
			}
			return Decision{Decision: NoDecision, Reason: d.Reason}
		}
	}
	type scored struct {
		id   string
		cost float64
		port int
	}
	var all []scored
	for _, c := range req.Candidates {
		attrs := map[string]string{}
		for _, a := range c.Attributes {
			attrs[a.Name] = a.Value
		}
		ok := true
		for _, r := range pol.Requirements {
			if scopeOK(r.Scope, req) && !slices.Contains(r.Values, attrs[r.Attribute]) {
				ok = false
			}
			if _, has := attrs[r.Attribute]; scopeOK(r.Scope, req) && !has {
				ok = false
			}
		}
		if !ok {
			continue
		}
		ranks, registered := loads[c.ID]
		var act, pre, dec float64
		for _, r := range ranks {
			act += float64(r.ActiveRequests)
			pre += float64(r.ActivePrefillTokens)
			dec += float64(r.ActiveDecodeBlocks)
		}
		run := act
		if c.Metrics.HasRunningRequests {
			run = max(run, float64(c.Metrics.RunningRequests))
		}
		cost := (w.Requests*run + w.PrefillTokens*pre + w.DecodeBlocks*dec) / float64(len(c.Ports))
		if c.Metrics.HasKVCacheUsage {
			cost += w.KVCacheUsage * c.Metrics.KVCacheUsage
		}
		if c.Metrics.HasEngineUtilization {
			cost += w.EngineUtilization * c.Metrics.EngineUtilization
		}
		for _, p := range pol.Preferences {
			if v, has := attrs[p.Attribute]; has && scopeOK(p.Scope, req) && slices.Contains(p.Values, v) {
				cost -= p.Weight
			}
		}
		port := c.Ports[0]
		if registered && len(ranks) == len(c.Ports) && len(ranks) > 1 &&
			slices.IsSortedFunc(ranks, func(a, b RankLoad) int { return cmp.Compare(a.Rank, b.Rank) }) &&
			len(slices.CompactFunc(slices.Clone(ranks), func(a, b RankLoad) bool { return a.Rank == b.Rank })) == len(ranks) {
			bestI, bestC := -1, 0.0
			for i, r := range ranks {
				rc := w.Requests*float64(r.ActiveRequests) + w.PrefillTokens*float64(r.ActivePrefillTokens) + w.DecodeBlocks*float64(r.ActiveDecodeBlocks)
				if bestI < 0 || rc < bestC {
					bestI, bestC = i, rc
				}
			}
			port = c.Ports[bestI]
		}
		all = append(all, scored{c.ID, cost, port})
	}
	if len(all) == 0 {
		if req.PolicyMode == Authoritative {
			return Decision{Decision: Denied, Reason: pol.NoMatchReason}
		}
		return Decision{Decision: NoDecision, Reason: pol.NoMatchReason}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if c := cmp.Compare(a.cost, b.cost); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return Decision{Decision: Selected, Target: Target{all[0].id, all[0].port}, Reason: ReasonLeastLoaded}
}

func scopeOK(s Scope, req *Request) bool {
	if len(s.Models) > 0 && !slices.Contains(s.Models, req.Model) {
		return false
	}
	for k, vs := range s.Context {
		v, ok := req.PolicyContext.Lookup(k)
		if !ok || !slices.Contains(vs, v) {
			return false
		}
	}
	return true
}

// TestEvaluateMatchesNaiveReference compares Evaluate with naiveDecide on
// random snapshots, policies and backend loads.
func TestEvaluateMatchesNaiveReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pol := mustPolicy(t, `
requirements:
- {models: [m1], attribute: gpu, values: [h100, h200]}
- {context: {tier: [premium]}, attribute: pool, values: [dedicated]}
preferences:
- {attribute: zone, values: [z1], weight: 1.5}
- {context: {tier: [gold, premium]}, attribute: pool, values: [dedicated], weight: 0.75}
- {models: [m2], attribute: gpu, values: [a100], weight: -1}
deny:
- {models: [m3], context: {tier: blocked}, reason: Blocked}
`)
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	for iter := 0; iter < 3000; iter++ {
		req := Request{Model: pick("m1", "m2", "m3"), PolicyMode: PolicyMode(pick("Advisory", "Authoritative"))}
		if rng.IntN(3) > 0 {
			req.PolicyContext = Attributes{{"tier", pick("gold", "premium", "blocked", "free")}}
		}
		loads := map[string][]RankLoad{}
		n := 1 + rng.IntN(12)
		for i := 0; i < n; i++ {
			c := Candidate{ID: fmt.Sprintf("ns/p%02d", rng.IntN(40))}
			if slices.ContainsFunc(req.Candidates, func(o Candidate) bool { return o.ID == c.ID }) {
				continue
			}
			np := 1 + rng.IntN(4)
			for p := 0; p < np; p++ {
				c.Ports = append(c.Ports, 8000+p)
			}
			for _, a := range []struct{ k string }{{"gpu"}, {"zone"}, {"pool"}} {
				if rng.IntN(2) == 0 {
					c.Attributes = append(c.Attributes, Attribute{a.k, pick("h100", "h200", "a100", "z1", "z2", "dedicated", "shared")})
				}
			}
			if rng.IntN(2) == 0 {
				c.Metrics.RunningRequests, c.Metrics.HasRunningRequests = int64(rng.IntN(6)), true
			}
			if rng.IntN(2) == 0 {
				c.Metrics.KVCacheUsage, c.Metrics.HasKVCacheUsage = float64(rng.IntN(5))/4, true
			}
			if rng.IntN(3) == 0 {
				c.Metrics.EngineUtilization, c.Metrics.HasEngineUtilization = float64(rng.IntN(3))/2, true
			}
			if rng.IntN(2) == 0 {
				nr := np
				if rng.IntN(4) == 0 {
					nr = 1 + rng.IntN(4)
				}
				var ranks []RankLoad
				for r := 0; r < nr; r++ {
					ranks = append(ranks, RankLoad{Rank: uint32(r), ActiveRequests: rng.IntN(4),
						ActivePrefillTokens: uint64(rng.IntN(3) * 512), ActiveDecodeBlocks: uint64(rng.IntN(3) * 64)})
				}
				loads[c.ID] = ranks
			}
			req.Candidates = append(req.Candidates, c)
		}
		be := &fakeBackend{model: req.Model, loads: loads}
		got := Evaluate(&req, pol, be, nil)
		want := naiveDecide(&req, pol, loads)
		if got != want {
			t.Fatalf("iteration %d: Evaluate = %+v, naive = %+v\nrequest %+v\nloads %+v", iter, got, want, req, loads)
		}
		if !got.Decision.Legal(req.PolicyMode) {
			t.Fatalf("illegal decision %+v", got)
		}
		// Wire order carries no preference.
		rev := req
		rev.Candidates = slices.Clone(req.Candidates)
		slices.Reverse(rev.Candidates)
		if again := Evaluate(&rev, pol, be, nil); again != got {
			t.Fatalf("iteration %d: decision depends on candidate order: %+v vs %+v", iter, again, got)
		}
	}
}
