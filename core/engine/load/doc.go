// Package load keeps the active-load accounting of one partition
// (model_name, routing_group) of the selection engine: which requests
// ("bookings") are live on which (worker, global DP rank), how many prefill
// tokens they still owe, and how many KV blocks they pin. It is the Go
// counterpart of Dynamo's per-rank ActiveSequences (dynamo-selector-spec.md
// §5.2, §6).
//
// # Model
//
// A [Tracker] holds the live bookings of every owner ([Owner]: worker id and
// global DP rank) of one partition. A booking contributes to its owner:
//
//   - one active request, until it is freed;
//   - its PrefillTokens to the active prefill tokens, until prefill completes
//     or the booking is freed;
//   - its prompt blocks, de-duplicated per owner: prompt blocks are
//     identified by tracking hashes (chained sequence hashes, so one hash
//     stands for its whole prefix) and reference-counted; a block already live
//     on the owner costs nothing extra;
//   - its output blocks, one per [Tracker.OutputBlock] call; they are private
//     to the booking.
//
// ActiveBlocks = round(Σ weights of the owner's live prompt blocks + Σ weights
// of its output blocks). Every block weighs 1 until [Tracker.OutputBlock] is
// called with a decay fraction f: then every block exclusively owned by that
// booking on its owner (the unshared suffix of its prompt, reference count 1,
// and all of its output blocks) weighs f. A weight, once set on a prompt
// block, stays with the block for as long as it is live, even if another
// booking later shares it (Dynamo behaves the same way). Rounding is half
// away from zero, like Rust's f64::round.
//
// Weights are fixed-point integers in units of 1e-9 block ([WeightUnit]), so
// sums are exact however long the tracker runs: freeing everything always
// returns every counter to exactly zero. A decay fraction is rounded to the
// nearest unit once, when it is applied.
//
// # Data structure
//
// The prompt blocks of all owners live in one partition-wide compressed trie
// keyed by tracking hash. Each trie node covers a run of hashes (an edge) that
// every booking passing through it covers entirely, so each node carries one
// list of (owner, reference count, weight) entries, sorted by owner, that is
// valid for every block of its edge. A node is split whenever a booking
// diverges or ends inside its edge, and merged back into its only child when
// a release leaves the two with identical entries. Nodes are found by the
// first hash of their edge under a given parent, through one hash map;
// walking a prompt therefore costs one map lookup per edge, not per block.
// [Tracker.ActivePrefix] walks the query's hashes down this trie once and
// reports, for every owner met, how far its live prefix reaches; owners drop
// out at the node boundary where their entry stops, in owner order, so the
// answer is a merge of a few sorted runs.
//
// # Ordinals
//
// A caller that keeps its own per-owner arrays (the engine scores every owner
// of a partition on every selection) addresses owners by ordinal, their
// position in (Worker, Rank) order: [Tracker.CountersAt] and [Tracker.LoadAt]
// read one owner's load in place, and [Tracker.ActivePrefixOrdinals] writes
// the live prefix lengths straight into an ordinal-indexed array, with no
// sorted answer to merge. Ordinals stay valid while [Tracker.Version] is
// unchanged (only owners coming or going renumber them).
//
// Tracking hashes must be chained: a hash determines the whole prefix before
// it. The trie is path-based, so input that breaks this contract cannot
// corrupt the tracker; blocks are then merely de-duplicated by path instead
// of by hash.
//
// # Concurrency and ownership
//
// The package is pure: no goroutines, no I/O, no clocks, no randomness.
// Times (AdmittedAt, Expire's cutoff) and output-block hashes are arguments.
// A Tracker is not safe for concurrent use; the caller (the engine, behind
// the service lock) serialises every call, including read-only ones such as
// [Tracker.Load] and [Tracker.ActivePrefix], which reuse no shared scratch but
// read structures that mutators rewrite. The tracker keeps Booking.Hashes
// (no copy); the caller must not modify that slice after a successful Add.
//
// No input makes the package panic.
package load
