// Package radix is the KV-cache prefix index of one (model_name, routing_group) partition: which
// owners — (worker, global dp rank) pairs — hold which prefix of a request's blocks, in which
// storage tiers.
//
// # Model
//
// A node is identified by its path of local block hashes from the root (our hash of each block's
// own tokens; see core/engine/kvhash). Each node has owners. Per (node, owner) the index keeps the
// owner's external block hash (the engine's opaque hash, used by the engine's store events to name
// a parent and by remove events to name a block) and a bitmask of the storage tiers the owner
// holds the block in (device, host_pinned, disk, external). A per-owner lookup external hash →
// node resolves parents and removals; the same external hash stored in several tiers is one node
// with several tier bits.
//
// Store, Remove, ClearOwner and RemoveWorker apply the engine's BlockStored, BlockRemoved and
// AllBlocksCleared events and worker deregistration. Match computes, per owner, the Mooncake
// "cumulative" overlap (device blocks from the root, then further host, disk and external blocks).
// ExternalPrefix yields an owner's external hashes along a request (for KV hints). Dump emits the
// index as replayable store events (Dynamo's /dump shape).
//
// # Layout
//
// Nodes live in one pointer-free slice addressed by uint32 with a free list; children are found
// through a single open-addressing table keyed by (parent, local hash); owner lookups through a
// single table keyed by (owner index, external hash). Owners are interned to dense indices, and
// each node's entries are a sorted chunk {owner index | tier bits, external hash} in a size-class
// slab whose freed chunks are reused. Nothing holds Go pointers per node, so the garbage collector
// ignores the index's bulk, and the heap held is about 100 bytes per (block, owner) entry on a realistic chat workload
// (BenchmarkMemoryPerEntry).
//
// Match merges the surviving owners with each node's sorted entries; a node whose owner list is
// identical to its parent's (the common case along a shared system prompt) is crossed in O(1)
// thanks to a lazily validated per-node flag.
//
// MatchSlots is Match for callers with their own per-owner arrays: each count is written during
// the walk into the caller's array, through a rank → slot table the caller rebuilds when Version
// (the owner set) changes, so no sorted answer is built and nothing is merged.
//
// # Purity and concurrency
//
// The package is pure: no goroutines, I/O, clocks or randomness. An Index is single-threaded: the
// caller serialises every call, including Match (which refreshes internal caches). Match values
// carry reusable scratch space and belong to one goroutine at a time.
//
// Nothing panics on any input: invalid tiers, unknown owners, unknown hashes and repeated hashes
// are reported through return values and sentinel errors.
package radix
