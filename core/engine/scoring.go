package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Custom routing strategies. An embedding program can add its own cost contributions (Scorers)
// and replace the final choice (Picker) while keeping everything else the engine does: the
// catalog, the prefix index, load accounting, reservations, sessions, replication.
//
// The pipeline for one selection is:
//
//  1. every schedulable rank of the partition becomes a Candidate (overlap per tier, booked
//     prefix, load, worker view);
//  2. the built-in cost is computed (Dynamo's formula or kvselect's policy), unless
//     Scoring.ReplaceBuiltin is set;
//  3. filters mark candidates ineligible (allowed_worker_ids, required taints) and preferred
//     taints scale the built-in cost;
//  4. each Scorer adds Weight·Score(ctx, c) to every eligible candidate's cost;
//  5. pinned_worker, a live session binding and affinity_target win outright when eligible;
//     otherwise the Picker chooses (default: arg-min with uniformly random ties at temperature 0,
//     softmax over normalised costs above it).
//
// Contract for implementations (checked by the scoretest package):
//   - Score and Pick run with the engine's lock held, once per eligible candidate (Score) or once
//     per selection (Pick): they must be fast, must not block, do I/O, or call back into the
//     engine or service.
//   - Arguments are read-only and valid only during the call: never modify or retain ctx, a
//     Candidate, its Worker maps, or the cands slice.
//   - Results must be deterministic functions of the arguments (and, for pickers, of rng): the
//     engine's seeded random source is the only randomness allowed, so that a seeded engine
//     replays identically. Scores must be finite.
//   - The same Scorer or Picker value may serve several engines at once: keep it free of mutable
//     state, or make that state safe for concurrent use.
//   - Allocation: the engine allocates nothing per candidate; a scorer that allocates per call
//     multiplies the cost of every selection by the number of ranks.

// SelectionContext is the read-only request view scorers and pickers receive.
type SelectionContext struct {
	Partition PartitionKey
	BlockSize uint32
	// ISL is the prompt length in tokens and Blocks its number of complete blocks.
	ISL    uint64
	Blocks int
	// SessionID is session_context.session_id, else session_id ("" when none).
	SessionID string
	// Session is the request's session_context (nil when absent) and AgentHeaders its
	// agent_headers (nil when absent). Read-only.
	Session      *SessionContext
	AgentHeaders map[string][]string
	// PolicyClass comes from the x-dynamo-meta-policy-class header.
	PolicyClass string
	// Booking is true for select_and_reserve, false for a query-only select.
	Booking bool
	// Temperature is the effective router temperature.
	Temperature float64
	// MinActivePrefillTokens is the smallest active prefill load among the partition's ranks.
	MinActivePrefillTokens uint64
	// fleet holds the partition's ranks, for scorers that price a rank against the others
	// (KVSelectScorer), central the partition's central learned speed (kvselectTerms.price) and
	// reordered whether its engines reorder their queues (kvselect_reorder.go).
	fleet     []scored
	central   PrefillModel
	reordered bool
}

// Scorer contributes to a candidate's cost; lower is better.
type Scorer interface {
	Score(ctx *SelectionContext, c *Candidate) float64
}

// ScorerFunc adapts a function to Scorer.
type ScorerFunc func(ctx *SelectionContext, c *Candidate) float64

// Score implements Scorer.
func (f ScorerFunc) Score(ctx *SelectionContext, c *Candidate) float64 { return f(ctx, c) }

// WeightedScorer is a Scorer with its weight in the cost sum.
type WeightedScorer struct {
	Name   string
	Weight float64
	Scorer Scorer
}

// ScoredCandidate is an eligible candidate with its final cost, as a Picker sees it.
type ScoredCandidate struct {
	*Candidate
	Cost float64
}

// Picker chooses among eligible candidates. It returns an index into cands, or -1 to refuse
// (the selection then fails with 503 "no endpoints available to route work").
type Picker interface {
	Pick(ctx *SelectionContext, cands []ScoredCandidate, rng *rand.Rand) int
}

// PickerFunc adapts a function to Picker.
type PickerFunc func(ctx *SelectionContext, cands []ScoredCandidate, rng *rand.Rand) int

// Pick implements Picker.
func (f PickerFunc) Pick(ctx *SelectionContext, cands []ScoredCandidate, rng *rand.Rand) int {
	return f(ctx, cands, rng)
}

// Scoring configures custom routing strategies (see the package documentation).
type Scoring struct {
	Scorers []WeightedScorer
	// ReplaceBuiltin drops the built-in cost: the cost is then the weighted sum of Scorers alone.
	ReplaceBuiltin bool
	// Picker replaces the default arg-min/softmax choice (nil = default).
	Picker Picker
}

// ErrScoring reports an invalid Scoring configuration.
var ErrScoring = errors.New("invalid scoring configuration")

// Validate rejects unnamed, duplicate, nil or non-finitely weighted scorers, and an empty cost
// (ReplaceBuiltin without scorers).
func (s *Scoring) Validate() error {
	seen := make(map[string]bool, len(s.Scorers))
	for _, ws := range s.Scorers {
		switch {
		case ws.Name == "":
			return fmt.Errorf("%w: a scorer has no name", ErrScoring)
		case seen[ws.Name]:
			return fmt.Errorf("%w: scorer %q is registered twice", ErrScoring, ws.Name)
		case ws.Scorer == nil:
			return fmt.Errorf("%w: scorer %q is nil", ErrScoring, ws.Name)
		case math.IsNaN(ws.Weight) || math.IsInf(ws.Weight, 0):
			return fmt.Errorf("%w: scorer %q has weight %v; weights must be finite", ErrScoring, ws.Name, ws.Weight)
		}
		seen[ws.Name] = true
	}
	if s.ReplaceBuiltin && len(s.Scorers) == 0 {
		return fmt.Errorf("%w: ReplaceBuiltin needs at least one scorer", ErrScoring)
	}
	return nil
}

// active reports whether anything custom is configured.
func (s *Scoring) active() bool { return len(s.Scorers) > 0 || s.ReplaceBuiltin || s.Picker != nil }

// selectionContext fills the scratch context for one selection.
func (e *Engine) selectionContext(sel *selection, req *SelectRequest, booking bool) *SelectionContext {
	ctx := &e.scratch.ctx
	*ctx = SelectionContext{
		Partition: sel.p.key, BlockSize: sel.p.blockSize, ISL: sel.norm.isl, Blocks: len(sel.norm.seq),
		SessionID: req.sessionID(), Session: req.SessionContext, PolicyClass: req.PolicyClass,
		Booking: booking, Temperature: sel.w.temperature, MinActivePrefillTokens: math.MaxUint64,
	}
	if req.SessionContext != nil {
		ctx.AgentHeaders = req.SessionContext.AgentHeaders
	}
	for i := range sel.cands {
		ctx.MinActivePrefillTokens = min(ctx.MinActivePrefillTokens, sel.cands[i].Load.ActivePrefillTokens)
	}
	if len(sel.cands) == 0 {
		ctx.MinActivePrefillTokens = 0
	}
	ctx.fleet, ctx.central, ctx.reordered = sel.cands, sel.w.central, sel.w.reordered
	return ctx
}

// applyScorers adds the custom scorers' contributions to every eligible candidate.
func (e *Engine) applyScorers(ctx *SelectionContext, cs []scored) {
	sc := &e.scoring
	for i := range cs {
		s := &cs[i]
		if !s.eligible {
			continue
		}
		if sc.ReplaceBuiltin {
			s.cost = 0
		}
		for _, ws := range sc.Scorers {
			s.cost += ws.Weight * ws.Scorer.Score(ctx, &s.Candidate)
		}
	}
}

// customPick runs the configured Picker over the eligible candidates and maps its answer back.
func (e *Engine) customPick(ctx *SelectionContext, cs []scored) int {
	buf := e.scratch.picked[:0]
	idx := e.scratch.idx[:0]
	for i := range cs {
		if cs[i].eligible {
			buf = append(buf, ScoredCandidate{Candidate: &cs[i].Candidate, Cost: cs[i].cost})
			idx = append(idx, i)
		}
	}
	e.scratch.picked, e.scratch.idx = buf, idx
	if len(buf) == 0 {
		return -1
	}
	j := e.scoring.Picker.Pick(ctx, buf, e.rng)
	clear(buf) // drop the candidate pointers so a retained slice sees nothing stale
	if j < 0 || j >= len(idx) {
		return -1
	}
	return idx[j]
}
