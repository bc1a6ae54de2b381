package engine

import (
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// Startup index recovery (spec §11.2–§11.3): a peer's /dump is replayed into a staging index
// per partition, built outside the engine lock, then installed atomically under it.
//
// Recovered indexes exist independently of the catalog. At startup the catalog is empty and
// workers register later, so an index whose partition does not exist yet is kept aside
// (pending) and adopted by the partition when the first worker creates it with the same block
// size. Owners in a recovered index need not be registered: their entries simply never score
// until (worker, rank) becomes a candidate, exactly like live events buffered before a worker
// registers in Dynamo's indexer.
//
// Atomicity: a staging index is either installed whole or not at all. Malformed input (an
// invalid tier or kind, capacity exhausted) poisons it: every later Apply and InstallRecovered
// fail. Events that are well-formed but do not fit the tree (an unknown parent, a hash repeated
// within one chain, the removal of an unknown block) are skipped and counted, as Dynamo's indexer
// does when it replays a weakly consistent dump.

// Recovery sentinel errors. Errors returned by InstallRecovered also wrap one of the engine's
// kind sentinels (ErrConflict, ErrBadRequest) so adapters can map them with their usual table.
var (
	// ErrRecoveryInvalid: a recovered event is malformed (unknown kind or tier).
	ErrRecoveryInvalid = errors.New("invalid recovered event")
	// ErrRecoveryBlockSize: the recovered index's block size differs from the partition's, or is
	// zero (unknown).
	ErrRecoveryBlockSize = errors.New("recovered index block_size mismatch")
	// ErrRecoveryPoisoned: the staging index saw a malformed event earlier; it cannot be used.
	ErrRecoveryPoisoned = errors.New("recovered index rejected")
	// ErrRecoveryDisabled: the engine runs without KV events (approximate index); recovered
	// event-fed state has no meaning there.
	ErrRecoveryDisabled = errors.New("index recovery needs use_kv_events")
	// ErrRecoveryConsumed: the staging index was already installed (ownership moved).
	ErrRecoveryConsumed = errors.New("recovered index already installed")
)

// RouterEventKind is the kind of a recovery-stream event.
type RouterEventKind uint8

// Recovery-stream event kinds: Dynamo's RouterEvent data variants.
const (
	RouterStored RouterEventKind = iota + 1
	RouterRemoved
	RouterCleared
)

// RecoveredBlock is one block of a recovered stored event: External is the engine's block_hash,
// Local is tokens_hash (the radix edge label, our request-side block hash).
type RecoveredBlock = radix.StoredBlock

// RouterEvent is the engine's form of one Dynamo RouterEvent of the /dump recovery format:
//
//	{"worker_id", "storage_tier", "event": {"event_id", "data": stored|removed|"cleared", "dp_rank"}}
//
// The wire decoding lives in package recovery; core translates. Slices are only read during
// Apply and may be reused by the caller afterwards.
type RouterEvent struct {
	Owner kvwire.Owner // worker_id, dp_rank
	Tier  kvwire.Tier  // storage_tier (device when absent on the wire)
	Kind  RouterEventKind
	// Stored: the chain hangs under the owner's block Parent (the root when !HasParent).
	Parent    uint64
	HasParent bool
	Blocks    []RecoveredBlock
	// Removed: the owner's external hashes to drop (in Tier).
	Removed []uint64
}

// RecoveryStats counts what a staging index absorbed.
type RecoveryStats struct {
	Events        int // events applied or skipped
	StoredBlocks  int // blocks stored (a block re-stored in another tier counts again)
	RemovedBlocks int // (block, tier) entries removed
	Cleared       int // cleared events
	Skipped       int // well-formed events that did not fit (orphan, duplicate, unknown removal)
}

// RecoveredIndex is a staging index for one dumped partition. It is built by one goroutine
// without any engine lock (it shares nothing with the engine) and handed to
// [Engine.InstallRecovered], which takes ownership: after a successful install the value is
// spent and every method but Stats fails.
//
// Concurrency: not safe for concurrent use.
type RecoveredIndex struct {
	blockSize uint32
	index     *radix.Index
	stats     RecoveryStats
	poisoned  error // first malformed-input error; sticky
}

// NewRecoveredIndex returns an empty staging index. blockSize may be 0 when the dump names it
// only after its events; set it with SetBlockSize before installing.
func NewRecoveredIndex(blockSize uint32) *RecoveredIndex {
	return &RecoveredIndex{blockSize: blockSize, index: radix.New()}
}

// SetBlockSize records the partition's block size (the dump's "block_size").
func (r *RecoveredIndex) SetBlockSize(bs uint32) { r.blockSize = bs }

// BlockSize returns the recorded block size (0 = unknown).
func (r *RecoveredIndex) BlockSize() uint32 { return r.blockSize }

// Stats returns what has been applied so far.
func (r *RecoveredIndex) Stats() RecoveryStats { return r.stats }

// Entries returns the number of (block, owner) entries held (0 once installed).
func (r *RecoveredIndex) Entries() int {
	if r.index == nil {
		return 0
	}
	return r.index.Stats().Entries
}

// Err returns the error that poisoned the index, or nil.
func (r *RecoveredIndex) Err() error { return r.poisoned }

// Apply replays one event into the staging index. A malformed event poisons the index and the
// error (wrapping ErrRecoveryInvalid or radix.ErrCapacity) is returned now and by every later
// call; a well-formed event that does not fit the tree is skipped, counted, and returns nil.
func (r *RecoveredIndex) Apply(ev *RouterEvent) error {
	if r.index == nil {
		return ErrRecoveryConsumed
	}
	if r.poisoned != nil {
		return r.poisoned
	}
	if ev.Tier >= kvwire.NumTiers {
		return r.poison(fmt.Errorf("%w: storage tier %d", ErrRecoveryInvalid, ev.Tier))
	}
	r.stats.Events++
	switch ev.Kind {
	case RouterStored:
		if len(ev.Blocks) == 0 {
			return nil // nothing to store; Dynamo accepts it as a no-op
		}
		err := r.index.Store(ev.Owner, ev.Tier, ev.Parent, ev.HasParent, ev.Blocks)
		switch {
		case err == nil:
			r.stats.StoredBlocks += len(ev.Blocks)
		case errors.Is(err, radix.ErrParentNotFound), errors.Is(err, radix.ErrDuplicateHash):
			r.stats.Skipped++
		default:
			return r.poison(err)
		}
	case RouterRemoved:
		rm, unknown := r.index.Remove(ev.Owner, ev.Tier, ev.Removed)
		r.stats.RemovedBlocks += rm
		if unknown > 0 {
			r.stats.Skipped++
		}
	case RouterCleared:
		r.index.ClearOwner(ev.Owner)
		r.stats.Cleared++
	default:
		return r.poison(fmt.Errorf("%w: event kind %d", ErrRecoveryInvalid, ev.Kind))
	}
	return nil
}

func (r *RecoveredIndex) poison(err error) error {
	r.poisoned = fmt.Errorf("%w: %w", ErrRecoveryPoisoned, err)
	return r.poisoned
}

// InstallOutcome says where InstallRecovered put a staging index.
type InstallOutcome uint8

// Install outcomes.
const (
	// InstalledReplaced: the partition existed with an empty index; the staging index became it.
	InstalledReplaced InstallOutcome = iota + 1
	// InstalledMerged: the partition already had entries; the staging entries were replayed
	// into it (live entries win where an owner's hash conflicts).
	InstalledMerged
	// InstalledPending: no partition yet; the index waits for one with the same key and block
	// size to be created, which adopts it.
	InstalledPending
)

func (o InstallOutcome) String() string {
	switch o {
	case InstalledReplaced:
		return "replaced"
	case InstalledMerged:
		return "merged"
	case InstalledPending:
		return "pending"
	}
	return "unknown"
}

// InstallRecovered installs r as partition key's index, atomically with respect to every other
// engine call (the caller holds the engine lock, as for any call). On success the engine owns
// r's index. On error nothing changed and r is left as it was.
//
// Cost: O(1) when the partition is new or its index is empty; a replay of r's entries (one
// Store per entry) when it must merge.
func (e *Engine) InstallRecovered(key PartitionKey, r *RecoveredIndex) (InstallOutcome, error) {
	if r == nil || r.index == nil {
		return 0, fmt.Errorf("%w: %w", ErrConflict, ErrRecoveryConsumed)
	}
	if !e.cfg.UseKVEvents {
		return 0, fmt.Errorf("%w: %w", ErrConflict, ErrRecoveryDisabled)
	}
	if r.poisoned != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrBadRequest, key, r.poisoned)
	}
	if r.blockSize == 0 {
		return 0, fmt.Errorf("%w: %s: %w: block_size unknown", ErrBadRequest, key, ErrRecoveryBlockSize)
	}
	if p := e.parts[key]; p != nil {
		if p.blockSize != r.blockSize {
			return 0, fmt.Errorf("%w: %s: %w: partition=%d recovered=%d", ErrConflict, key, ErrRecoveryBlockSize, p.blockSize, r.blockSize)
		}
		if p.index.Stats().Entries == 0 {
			p.index = r.index
			r.index = nil
			return InstalledReplaced, nil
		}
		mergeIndex(p.index, r.index)
		r.index = nil
		return InstalledMerged, nil
	}
	if prev := e.recovery.pending[key]; prev != nil {
		if prev.blockSize != r.blockSize {
			return 0, fmt.Errorf("%w: %s: %w: pending=%d recovered=%d", ErrConflict, key, ErrRecoveryBlockSize, prev.blockSize, r.blockSize)
		}
		mergeIndex(prev.index, r.index)
		r.index = nil
		return InstalledPending, nil
	}
	if e.recovery.pending == nil {
		e.recovery.pending = make(map[PartitionKey]*RecoveredIndex)
	}
	e.recovery.pending[key] = &RecoveredIndex{blockSize: r.blockSize, index: r.index, stats: r.stats}
	r.index = nil
	return InstalledPending, nil
}

// mergeIndex replays src's entries into dst (parents before children, so every chain attaches).
// A src entry that conflicts with dst (the owner bound that hash elsewhere) follows Store's
// newest-wins rule; one that no longer attaches is dropped. A bridged entry (below a block its
// owner removed) is stored with its placeholders, which are then removed; it is dropped in the
// unlikely case that dst's owner holds a placeholder hash. src is left unusable.
func mergeIndex(dst, src *radix.Index) {
	var ph []uint64
	src.Dump(func(ev radix.DumpEvent) bool {
		ph = ph[:0]
		for _, b := range ev.Blocks[:ev.Bridge] {
			if dst.Holds(ev.Owner, b.External) {
				return true
			}
			ph = append(ph, b.External)
		}
		if dst.Store(ev.Owner, ev.Tier, ev.Parent, ev.HasParent, ev.Blocks) == nil && len(ph) > 0 { // best effort, see above
			dst.Remove(ev.Owner, ev.Tier, ph)
		}
		return true
	})
}

// adoptRecovered gives a freshly created partition the recovered index waiting for its key, if
// the block sizes agree; a mismatching one is discarded (the catalog has spoken). Called by
// reconcile right after newPartition.
func (e *Engine) adoptRecovered(p *partition) {
	r := e.recovery.pending[p.key]
	if r == nil {
		return
	}
	delete(e.recovery.pending, p.key)
	if r.blockSize != p.blockSize || p.approx != nil {
		e.recovery.discarded++
		return
	}
	p.index = r.index
	r.index = nil
}

// recoveryState is the engine's recovery bookkeeping (the Engine's only recovery field).
type recoveryState struct {
	pending   map[PartitionKey]*RecoveredIndex // installed before their partition existed
	discarded int                              // pending indexes dropped on a block-size clash
}

// PendingRecovered summarises recovered indexes still waiting for their partition.
type PendingRecovered struct {
	Partitions int // indexes waiting
	Entries    int // their (block, owner) entries
	Discarded  int // indexes dropped because the partition was created with another block size
}

// RecoveredPending reports the recovered indexes not adopted yet. O(partitions).
func (e *Engine) RecoveredPending() PendingRecovered {
	out := PendingRecovered{Partitions: len(e.recovery.pending), Discarded: e.recovery.discarded}
	for _, r := range e.recovery.pending {
		out.Entries += r.index.Stats().Entries
	}
	return out
}
