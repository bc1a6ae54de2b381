package engine

// A policy is a built-in cost function (Config.Policy). Both selection paths price ranks through
// it, so they cannot drift: costs prices the general path's scored candidates in place; fast is
// chooseFast's per-rank loop over the fast scratch, fused with the default picker (fast.go).
// Dispatch is one call per selection, never per rank; both methods compute bit-identical costs
// for the same inputs (TestFastPathDifferential). The prompt goes by value, so the caller's stays
// on its stack.
//
// Adding a policy is one file (policy_<name>.go) and one entry in policies; Config.Validate
// accepts every registered name.
type policy interface {
	costs(cs []scored, n normalized, blockSize uint32, w weights)
	fast(e *Engine, sel *selection)
}

// policies registers the built-in cost functions by selection_policy name.
var policies = map[string]policy{
	PolicyDynamo:   dynamoPolicy{},
	PolicyKVSelect: kvselectPolicy{},
}
