package engine

import (
	"slices"
	"strings"

	"github.com/kvselect/kvselect/core/engine/radix"
)

// A policy is a built-in cost function (Config.Policy). Both selection paths price ranks through
// it, so they cannot drift: costs prices the general path's scored candidates in place; fast is
// chooseFast's per-rank loop over fastRanks, fused with the default picker. Dispatch is one call
// per selection, never per rank; both methods compute bit-identical costs for the same inputs
// (TestFastPathDifferential). The prompt goes by value, so the caller's stays on its stack.
//
// Adding a policy is one file (policy_<name>.go) and one entry in policies; Config.Validate
// accepts every registered name.
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

// fastRanks is a policy's view of one fast-path selection, indexed by candidate (= tracker
// ordinal): overlap and booked prefix in, cost out, loads read in place from p.tracker. The loop
// offers cost[i] to pick when draw is set and the rank is eligible (elig nil or elig[i]), spelling
// argmin.offer out (it does not inline). It lives in the engine's scratch: passing it allocates
// nothing.
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
