package engine

import (
	"slices"
	"strings"

	"github.com/kvselect/kvselect/core/engine/radix"
)

// A policy is a built-in cost function, chosen by Config.Policy (selection_policy) and per
// request by nothing else. Both selection paths price ranks through it, so they cannot drift:
//
//   - costs prices the general path's scored candidates in place (score, scoreMerged);
//   - fast is chooseFast's per-rank loop over the compact arrays of fastRanks, fused with the
//     default picker (fast.go).
//
// Dispatch is one interface call per selection (the prompt goes by value, so the caller's
// stays on its stack); each policy's per-rank loop is its own concrete
// code, so nothing is dispatched per rank. Both methods must compute bit-identical costs for the
// same inputs (TestFastPathDifferential).
//
// Adding a policy is one file (policy_<name>.go, a type implementing policy) and one entry in
// policies; Config.Validate accepts every registered name.
type policy interface {
	costs(cs []scored, n normalized, blockSize uint32, w weights)
	fast(r *fastRanks)
}

// policies registers the built-in cost functions by selection_policy name.
var policies = map[string]policy{
	PolicyDynamo:   dynamoPolicy{},
	PolicyKVSelect: kvselectPolicy{},
}

// policyNames lists the registered names, sorted, as "a or b" (Config.Validate's message).
func policyNames() string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, " or ")
}

// fastRanks is a policy's view of one fast-path selection: per rank (index = candidate =
// tracker ordinal) the tiered overlap and booked prefix, and the output cost; loads are read in
// place from p.tracker. The policy's loop also runs the default picker: for each rank, when draw
// is set and the rank is eligible (elig nil or elig[i]), it offers cost[i] to pick, spelling
// argmin.offer out (better, else tie: offer does not inline). It lives in the engine's scratch,
// so handing it to the policy allocates nothing.
type fastRanks struct {
	e      *Engine
	p      *partition
	n      *normalized
	w      weights
	ov     []radix.Counts
	booked []uint32
	cost   []float64
	elig   []bool
	draw   bool
	pick   argmin
}
