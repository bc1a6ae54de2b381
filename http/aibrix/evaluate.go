package aibrix

import "slices"

// Backend is what the decision service needs from kvselect's core: its own
// active-load accounting for workers it knows.
//
// Contract for implementations: CandidateLoad is called once per eligible
// candidate per decision, concurrently from many requests; it must be safe
// for concurrent use, must not block on I/O, and must not retain or mutate
// the returned slice after returning it (the caller only reads it before
// the next call).
type Backend interface {
	// CandidateLoad reports kvselect's active load for the registered worker whose
	// stable_routing_id equals candidateID in a partition whose model_name equals model.
	// ok=false when no such worker is registered. Ranks are in ascending DP-rank order.
	CandidateLoad(model, candidateID string) (ranks []RankLoad, ok bool)
}

// RankLoad is the active load of one data-parallel rank of a worker.
type RankLoad struct {
	Rank                                    uint32
	ActivePrefillTokens, ActiveDecodeBlocks uint64
	ActiveRequests                          int
}

// Reasons written into status.reason of Selected decisions. They are
// diagnostic only; the Gateway never shows them to clients.
const (
	ReasonLeastLoaded     = "LeastLoaded"
	ReasonSessionAffinity = "SessionAffinity"
)

// Decision is the outcome of [Evaluate]: what to answer, and whether the
// session (if any) should be bound to the target.
type Decision struct {
	Decision DecisionType
	Target   Target // valid iff Decision == Selected
	Reason   string
	// BindSession is true when the request carried a session (see
	// [SessionKeyFor]) and the decision is Selected: the caller should bind
	// the session to Target so the next request of the session sticks.
	BindSession bool
}

// SessionKeyFor returns the session of req under pol, if the policy names a
// session attribute and the request's trusted policy context carries it.
func SessionKeyFor(req *Request, pol *Policy) (SessionKey, bool) {
	if pol == nil || pol.SessionKey == "" {
		return SessionKey{}, false
	}
	v, ok := req.PolicyContext.Lookup(pol.SessionKey)
	if !ok || v == "" {
		return SessionKey{}, false
	}
	return SessionKey{Model: req.Model, Value: v}, true
}

// Evaluate decides one request. It is deterministic and performs no I/O of
// its own: req must come from [DecodeRequest]; pol may be nil (no policy);
// backend may be nil (no kvselect load is known); sticky is the session's
// current binding or nil. Steps, in order:
//
//  1. The first in-scope deny rule refuses the request: Denied in
//     Authoritative mode, NoDecision in Advisory mode, with the rule's reason.
//  2. Candidates failing any in-scope requirement are dropped. None left:
//     Denied (Authoritative) or NoDecision (Advisory), reason
//     Policy.NoMatchReason.
//  3. A sticky binding whose candidate is still eligible wins; its bound port
//     is kept when still advertised.
//  4. Otherwise the eligible candidate with the lowest cost wins (package doc
//     formula); equal costs go to the smallest candidate id in byte order.
//
// The result only ever holds a decision legal for req.PolicyMode.
func Evaluate(req *Request, pol *Policy, backend Backend, sticky *Binding) Decision {
	refuse := func(reason string) Decision {
		if req.PolicyMode == Authoritative {
			return Decision{Decision: Denied, Reason: reason}
		}
		return Decision{Decision: NoDecision, Reason: reason}
	}
	weights := DefaultLoadWeights
	noMatch := DefaultNoMatchReason
	var requirements []Requirement
	var preferences []Preference
	if pol != nil {
		for i := range pol.Deny {
			if pol.Deny[i].applies(req.Model, req.PolicyContext) {
				return refuse(pol.Deny[i].Reason)
			}
		}
		if pol.Load != (LoadWeights{}) {
			weights = pol.Load
		}
		if pol.NoMatchReason != "" {
			noMatch = pol.NoMatchReason
		}
		requirements, preferences = pol.Requirements, pol.Preferences
	}
	_, hasSession := SessionKeyFor(req, pol)

	// Scope checks depend only on the request: do them once.
	var reqBuf [16]bool
	reqApplies := scopeMask(reqBuf[:0], len(requirements), func(i int) bool {
		return requirements[i].applies(req.Model, req.PolicyContext)
	})
	var prefBuf [16]bool
	prefApplies := scopeMask(prefBuf[:0], len(preferences), func(i int) bool {
		return preferences[i].applies(req.Model, req.PolicyContext)
	})

	best := -1
	var bestCost float64
	var bestPort int
	for ci := range req.Candidates {
		c := &req.Candidates[ci]
		if !eligible(c, requirements, reqApplies) {
			continue
		}
		var ranks []RankLoad
		var registered bool
		if backend != nil {
			ranks, registered = backend.CandidateLoad(req.Model, c.ID)
		}
		if sticky != nil && sticky.CandidateID == c.ID {
			port := sticky.Port
			if !slices.Contains(c.Ports, port) {
				_, port = LoadOf(c, ranks, registered, &weights)
			}
			return Decision{Decision: Selected, Target: Target{ID: c.ID, Port: port},
				Reason: ReasonSessionAffinity, BindSession: hasSession}
		}
		load, port := LoadOf(c, ranks, registered, &weights)
		cost := load - preferenceBonus(c, preferences, prefApplies)
		if best < 0 || cost < bestCost || (cost == bestCost && c.ID < req.Candidates[best].ID) {
			best, bestCost, bestPort = ci, cost, port
		}
	}
	if best < 0 {
		return refuse(noMatch)
	}
	return Decision{Decision: Selected, Target: Target{ID: req.Candidates[best].ID, Port: bestPort},
		Reason: ReasonLeastLoaded, BindSession: hasSession}
}

// scopeMask fills buf with applies(i) for i in [0,n), growing it if needed.
// Callers pass a small stack array so typical policies (≤16 rules of a
// kind) cost no allocation per decision.
func scopeMask(buf []bool, n int, applies func(int) bool) []bool {
	for i := 0; i < n; i++ {
		buf = append(buf, applies(i))
	}
	return buf
}

// eligible reports whether c satisfies every in-scope requirement. A
// candidate without the required attribute is ineligible: absence never
// satisfies a hard requirement.
func eligible(c *Candidate, rs []Requirement, applies []bool) bool {
	for i := range rs {
		if !applies[i] {
			continue
		}
		v, ok := c.Attributes.Lookup(rs[i].Attribute)
		if !ok || !rs[i].Values.Contains(v) {
			return false
		}
	}
	return true
}

// preferenceBonus sums the weights of in-scope preferences c matches.
// Preferences are additive, so two matched preferences of weight 1 are
// worth as much as one of weight 2.
func preferenceBonus(c *Candidate, ps []Preference, applies []bool) float64 {
	var bonus float64
	for i := range ps {
		if !applies[i] {
			continue
		}
		if v, ok := c.Attributes.Lookup(ps[i].Attribute); ok && ps[i].Values.Contains(v) {
			bonus += ps[i].Weight
		}
	}
	return bonus
}

// LoadOf computes a candidate's load term and the port to answer (see the
// package doc for the formula and the port/rank mapping). ranks and
// registered are the Backend's answer for c (nil/false when unknown).
func LoadOf(c *Candidate, ranks []RankLoad, registered bool, w *LoadWeights) (load float64, port int) {
	n := len(c.Ports)
	if n == 0 { // unreachable for decoded requests; never divide by zero
		return 0, 0
	}
	var active int64
	var prefill, decode float64
	if registered {
		for i := range ranks {
			active += int64(max(ranks[i].ActiveRequests, 0))
			prefill += float64(ranks[i].ActivePrefillTokens)
			decode += float64(ranks[i].ActiveDecodeBlocks)
		}
	}
	running := active
	if c.Metrics.HasRunningRequests && c.Metrics.RunningRequests > running {
		running = c.Metrics.RunningRequests
	}
	load = (w.Requests*float64(running) + w.PrefillTokens*prefill + w.DecodeBlocks*decode) / float64(n)
	if c.Metrics.HasKVCacheUsage {
		load += w.KVCacheUsage * c.Metrics.KVCacheUsage
	}
	if c.Metrics.HasEngineUtilization {
		load += w.EngineUtilization * c.Metrics.EngineUtilization
	}
	return load, choosePort(c.Ports, ranks, registered, w)
}

// choosePort maps ports to ranks when the mapping is well defined: the
// worker is registered, it reports exactly len(ports) ranks in strictly
// ascending rank order, and there are at least two. Then ports[i] (ports are
// ascending) serves ranks[i] and the least-loaded rank's port is returned,
// ties going to the lower rank. Otherwise the smallest port is returned.
func choosePort(ports []int, ranks []RankLoad, registered bool, w *LoadWeights) int {
	if !registered || len(ranks) != len(ports) || len(ports) < 2 {
		return ports[0]
	}
	for i := 1; i < len(ranks); i++ {
		if ranks[i].Rank <= ranks[i-1].Rank {
			return ports[0]
		}
	}
	best := 0
	bestCost := rankCost(&ranks[0], w)
	for i := 1; i < len(ranks); i++ {
		if c := rankCost(&ranks[i], w); c < bestCost {
			best, bestCost = i, c
		}
	}
	return ports[best]
}

// rankCost is the per-rank part of the load formula, used only to choose
// among a candidate's ports; it excludes the pod-wide metrics, which are
// the same for every rank of the pod.
func rankCost(r *RankLoad, w *LoadWeights) float64 {
	return w.Requests*float64(max(r.ActiveRequests, 0)) +
		w.PrefillTokens*float64(r.ActivePrefillTokens) +
		w.DecodeBlocks*float64(r.ActiveDecodeBlocks)
}
