package engine

import (
	"slices"

	"github.com/kvselect/kvselect/core/engine/kvhash"
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// KVEventKind is the kind of a worker KV-cache event.
type KVEventKind uint8

// Worker KV-cache event kinds.
const (
	KVStored KVEventKind = iota + 1
	KVRemoved
	KVCleared
)

// KVEvent is one decoded worker KV-cache event, independent of the wire encoding (the ZMQ side
// translates vLLM/SGLang events into it). Slices are only read during ApplyKVEvents.
type KVEvent struct {
	Kind KVEventKind
	Tier kvwire.Tier
	// BlockHashes are the engine's (external) block hashes: the stored chain for KVStored, the
	// removed blocks for KVRemoved.
	BlockHashes []uint64
	Parent      uint64
	HasParent   bool
	TokenIDs    []uint32 // for KVStored: the tokens of every stored block, concatenated
	BlockSize   int
	Eagle       bool
	LoraName    string
	CacheSalt   string
	MMHashes    [][]uint64 // per stored block; nil when none
	// LocalHashes, when set for KVStored, are the blocks' local (token-content) hashes computed
	// by the source itself — a simulator or a recovery stream that already speaks the index's
	// hash. TokenIDs are then ignored; len(LocalHashes) must equal len(BlockHashes).
	LocalHashes []uint64
}

// KVApplyStats counts what ApplyKVEvents did.
type KVApplyStats struct {
	StoredBlocks   int // blocks indexed
	RemovedBlocks  int // (block, tier) entries removed
	Cleared        int // AllBlocksCleared events applied
	Dropped        int // events dropped (unknown owner, parent not found, duplicate hashes)
	SizeMismatches int // stored blocks dropped because their block_size differs from the partition's
	Truncated      int // stored events cut short for lack of tokens
	UnknownRemoved int // removals of blocks the owner did not hold
}

// Add accumulates another batch's counters.
func (s *KVApplyStats) Add(o KVApplyStats) {
	s.StoredBlocks += o.StoredBlocks
	s.RemovedBlocks += o.RemovedBlocks
	s.Cleared += o.Cleared
	s.Dropped += o.Dropped
	s.SizeMismatches += o.SizeMismatches
	s.Truncated += o.Truncated
	s.UnknownRemoved += o.UnknownRemoved
}

// ApplyKVEvents applies one batch of a rank's KV-cache events to its partition's index. Events
// of an owner that is not a schedulable rank of the catalog are dropped. The index is keyed by
// our own hash of each stored block's tokens (the same function that hashes requests), so request
// lookups match engine-produced blocks without knowing the engine's hash function.
func (e *Engine) ApplyKVEvents(o kvwire.Owner, events []KVEvent) KVApplyStats {
	var st KVApplyStats
	w, ok := e.workers[o.Worker]
	if !ok || !w.schedulable() || !w.hasRank(o.Rank) {
		st.Dropped += len(events)
		return st
	}
	p := e.parts[w.key]
	if p == nil {
		st.Dropped += len(events)
		return st
	}
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case KVStored:
			e.applyStored(p, w, o, ev, &st)
		case KVRemoved:
			rm, unknown := p.index.Remove(o, ev.Tier, ev.BlockHashes)
			st.RemovedBlocks += rm
			st.UnknownRemoved += unknown
		case KVCleared:
			p.index.ClearOwner(o)
			p.forgetOrder(o)
			st.Cleared++
		default:
			st.Dropped++
		}
	}
	return st
}

func (e *Engine) applyStored(p *partition, w *worker, o kvwire.Owner, ev *KVEvent, st *KVApplyStats) {
	if e.hasDuplicate(ev.Parent, ev.HasParent, ev.BlockHashes) {
		st.Dropped++
		return
	}
	if ev.BlockSize != int(p.blockSize) {
		st.SizeMismatches += len(ev.BlockHashes)
		return
	}
	if ev.LocalHashes != nil {
		if len(ev.LocalHashes) != len(ev.BlockHashes) {
			st.Dropped++
			return
		}
		blocks := e.scratch.stored[:0]
		for i, ext := range ev.BlockHashes {
			blocks = append(blocks, radix.StoredBlock{External: ext, Local: ev.LocalHashes[i]})
		}
		e.scratch.stored = blocks
		e.storeBlocks(p, w, o, ev, blocks, st)
		return
	}
	bs := int(p.blockSize)
	window := bs
	if ev.Eagle {
		window = bs + 1
	}
	// Only blocks whose tokens are complete are stored (kvhash's definition, shared with prompt
	// hashing); a shorter token list truncates the chain.
	n := min(len(ev.BlockHashes), kvhash.BlockCount(len(ev.TokenIDs), bs, ev.Eagle))
	if n < len(ev.BlockHashes) {
		st.Truncated++
	}
	seed := kvhash.BlockSeed(ev.LoraName, ev.CacheSalt)
	blocks := e.scratch.stored[:0]
	for i, ext := range ev.BlockHashes[:n] {
		lo := i * bs
		var mm []uint64
		if i < len(ev.MMHashes) {
			mm = ev.MMHashes[i]
		}
		blocks = append(blocks, radix.StoredBlock{External: ext, Local: kvhash.BlockHash(ev.TokenIDs[lo:lo+window], seed, mm)})
	}
	e.scratch.stored = blocks
	e.storeBlocks(p, w, o, ev, blocks, st)
}

// storeBlocks stores one chain in the index and counts the outcome.
func (e *Engine) storeBlocks(p *partition, w *worker, o kvwire.Owner, ev *KVEvent, blocks []radix.StoredBlock, st *KVApplyStats) {
	if len(blocks) == 0 {
		return
	}
	if err := p.index.Store(o, ev.Tier, ev.Parent, ev.HasParent, blocks); err != nil {
		st.Dropped++
		return
	}
	st.StoredBlocks += len(blocks)
	e.noteStored(p, w, o, blocks) // the rank's index budget (indexbudget.go)
}

// hasDuplicate reports whether any hash repeats within the parent and the chain (Dynamo drops
// such events: a cycle would corrupt the tree). Short chains are compared pairwise; long ones are
// sorted in the reusable scratch buffer, so the check never allocates in steady state.
func (e *Engine) hasDuplicate(parent uint64, hasParent bool, hs []uint64) bool {
	if len(hs) <= 16 {
		for i, h := range hs {
			if hasParent && h == parent {
				return true
			}
			for _, g := range hs[:i] {
				if g == h {
					return true
				}
			}
		}
		return false
	}
	buf := append(e.dups[:0], hs...)
	if hasParent {
		buf = append(buf, parent)
	}
	slices.Sort(buf)
	e.dups = buf
	for i := 1; i < len(buf); i++ {
		if buf[i] == buf[i-1] {
			return true
		}
	}
	return false
}

// ClearOwnerBlocks drops every indexed block of one rank (a restarted publisher's stale
// ownership). It reports whether the rank was known.
func (e *Engine) ClearOwnerBlocks(o kvwire.Owner) bool {
	w, ok := e.workers[o.Worker]
	if !ok {
		return false
	}
	p := e.parts[w.key]
	if p == nil || p.members[o.Worker] != w {
		return false
	}
	p.index.ClearOwner(o)
	p.forgetOrder(o)
	return true
}
