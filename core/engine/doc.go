// Package engine is kvselect's selection engine: the worker catalog and its partitions, the
// radix prefix index fed by worker KV events (package radix), active-load accounting (package
// load), reservations and the pending-selection cache, session affinity, the router queue
// (rqueue*.go: who parks, in what order, policy-class budgets and admission), the cost functions
// and the picker.
//
// # Purity
//
// The engine is a deterministic state machine in the style of etcd/raft. It starts no
// goroutines, does no I/O, never reads the clock and uses no global randomness: time is the
// `now` argument of every operation that can age state, and randomness comes from the
// *rand.Rand in Options. Effects for the outside world are returned as data in one outbox
// (Ready: replica lifecycle events, session bindings, router-queue admissions), drained by the
// owner once after each call with TakeReady and acted on by it (core.Service's flushLocked).
// Every map iteration whose order reaches an output is sorted, so a seeded engine fed the same
// calls makes the same decisions and effects, which is what the scripted tests (testdata/*.txt,
// TestDeterministicScripts) and the trace simulator rely on.
//
// # Concurrency
//
// An Engine is not safe for concurrent use; core.Service serialises every call behind one
// mutex. Scratch buffers are reused across selections, so a selection allocates nothing per
// candidate.
//
// # Data model
//
// A partition is one (model_name, routing_group). Its candidates are the (worker, global DP
// rank) pairs of its schedulable workers. The prefix index is keyed by the public block hash of
// each block's tokens (XXH3-64, seed 1337 plus LoRA and cache-salt terms, spec §4.2), with the
// engine's own block hashes kept per owner so that BlockRemoved and parent_block_hash resolve.
// Load is tracked per rank from tracking hashes (chained sequence hashes), de-duplicating prompt
// blocks shared by live requests.
//
// # Cost functions
//
// PolicyDynamo reproduces Dynamo's formula exactly (policy_dynamo.go); PolicyKVSelect estimates
// each rank's time to first token with a quadratic prefill-time model and a discounted
// cache-affinity pull (policy_kvselect.go, kvselect_cost.go). Both implement the policy interface
// (policy.go) that the fast and the general path share; a new policy is one file and one entry
// in policies. Custom Scorers and a Picker plug in through Options.Scoring (scoring.go). Owners
// and storage tiers are kvwire's types, shared with bus and recovery.
package engine
