package kvevents

import (
	"bytes"

	"github.com/kvselect/kvselect/kvwire"
)

// Kind is the type of one KV event.
type Kind uint8

// Event kinds. The zero value is not a valid decoded kind.
const (
	KindInvalid Kind = iota
	// KindBlockStored: full blocks entered the cache (BlockStored).
	KindBlockStored
	// KindBlockRemoved: blocks were evicted (BlockRemoved).
	KindBlockRemoved
	// KindAllBlocksCleared: the worker's whole prefix cache was reset.
	KindAllBlocksCleared
)

// Wire tags of the event kinds (element 0 of array events, "type" of map
// events).
const (
	TagBlockStored      = "BlockStored"
	TagBlockRemoved     = "BlockRemoved"
	TagAllBlocksCleared = "AllBlocksCleared"
	// TagIgnored is accepted and dropped silently (not counted as unknown).
	TagIgnored = "Ignored"
)

// String returns the wire tag of k.
func (k Kind) String() string {
	switch k {
	case KindBlockStored:
		return TagBlockStored
	case KindBlockRemoved:
		return TagBlockRemoved
	case KindAllBlocksCleared:
		return TagAllBlocksCleared
	}
	return "Invalid"
}

// ParseMedium maps a wire medium string to a tier (ASCII case-insensitive):
// GPU/DEVICE → device; CPU/CPU_PINNED/CPU_TIER1 → host pinned;
// CPU_TIER2/DISK/NVME → disk; EXTERNAL/NETWORK/REMOTE/SHARED → external;
// anything else (including "") → device. The tiers are kvwire's, in the router's query order.
func ParseMedium(s string) kvwire.Tier { return parseMediumBytes([]byte(s)) }

// parseMediumBytes is ParseMedium for decoder scratch bytes (no allocation).
func parseMediumBytes(s []byte) kvwire.Tier {
	for _, m := range mediumNames {
		if bytes.EqualFold(s, []byte(m.name)) {
			return m.medium
		}
	}
	return kvwire.TierDevice
}

// mediumNames lists the non-device medium spellings seen in vLLM, SGLang,
// the offloading connectors and Dynamo; "GPU"/"DEVICE" and anything else
// fall through to kvwire.TierDevice.
var mediumNames = [...]struct {
	name   string
	medium kvwire.Tier
}{
	{"CPU", kvwire.TierHostPinned}, {"CPU_PINNED", kvwire.TierHostPinned}, {"CPU_TIER1", kvwire.TierHostPinned},
	{"CPU_TIER2", kvwire.TierDisk}, {"DISK", kvwire.TierDisk}, {"NVME", kvwire.TierDisk},
	{"EXTERNAL", kvwire.TierExternal}, {"NETWORK", kvwire.TierExternal}, {"REMOTE", kvwire.TierExternal}, {"SHARED", kvwire.TierExternal},
}

// MediumString returns the canonical wire string of tier m: "GPU", "CPU_PINNED",
// "DISK" or "EXTERNAL" ("GPU" for an invalid tier).
func MediumString(m kvwire.Tier) string {
	if m < kvwire.NumTiers {
		return mediumWire[m]
	}
	return "GPU"
}

var mediumWire = [kvwire.NumTiers]string{"GPU", "CPU_PINNED", "DISK", "EXTERNAL"}

// Locality is the optional "locality" of a map-form event.
type Locality uint8

// Localities; LocalityUnset when absent or unrecognised.
const (
	LocalityUnset Locality = iota
	LocalityLocal
	LocalityRemote
)

// String returns "LOCAL", "REMOTE" or "".
func (l Locality) String() string {
	switch l {
	case LocalityLocal:
		return "LOCAL"
	case LocalityRemote:
		return "REMOTE"
	}
	return ""
}

// parseLocality maps "LOCAL"/"REMOTE" (case-insensitive) to a Locality.
func parseLocality(s []byte) Locality {
	switch {
	case bytes.EqualFold(s, []byte("LOCAL")):
		return LocalityLocal
	case bytes.EqualFold(s, []byte("REMOTE")):
		return LocalityRemote
	}
	return LocalityUnset
}

// Event is one decoded KV event. Fields a kind does not carry stay zero.
//
// Slices are owned by the Batch the event lives in and are overwritten by
// the next Decode into that Batch.
type Event struct {
	Kind Kind

	// BlockHashes are the engine's opaque block hashes, normalised to u64:
	// signed ints by two's-complement reinterpretation, unsigned ints as is,
	// and byte strings as int.from_bytes(b, "big") mod 2^64 — i.e. the last
	// 8 bytes read big-endian, which is exactly the integer vLLM publishes
	// for the same digest when VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1
	// (shorter strings are zero-extended on the left; empty is 0).
	BlockHashes []uint64
	// Parent is the engine hash of the block preceding BlockHashes[0];
	// valid only when HasParent (nil on the wire means "chain starts at the
	// root").
	Parent    uint64
	HasParent bool

	// TokenIDs is the concatenation of the stored blocks' tokens. For Eagle
	// bigram lists [(a0,b0),...,(an,bn)] it is a0..an followed by bn, and
	// Eagle is true.
	TokenIDs []uint32
	Eagle    bool
	// BlockSize is the engine's block size in tokens (0 when absent, e.g.
	// on BlockRemoved or offloading-connector events).
	BlockSize int

	// Medium is the storage tier (device when absent).
	Medium kvwire.Tier
	// LoraName is the adapter name ("" when none); CacheSalt the cache
	// namespace from a map event's cache_salt or SGLang's metadata element.
	LoraName, CacheSalt string
	// MMHashes holds, per block, the multimodal hashes found in extra_keys
	// (64-hex identifiers, first 16 hex digits) and block_mm_infos. It is
	// nil when no block has any; otherwise entry i is nil for a block
	// without multimodal content, and the length is that of the longest
	// per-block list on the wire.
	MMHashes [][]uint64

	// GroupIdx is the hybrid-attention KV cache group (HasGroupIdx when
	// present, even if 0).
	GroupIdx    int64
	HasGroupIdx bool
	// SpecKind is kv_cache_spec_kind ("" when absent), e.g. full_attention.
	SpecKind string
	// SlidingWindow is kv_cache_spec_sliding_window when HasSlidingWindow.
	SlidingWindow    int64
	HasSlidingWindow bool
	// Locality is the map-form "locality" field.
	Locality Locality
}

// indexableKinds are the kv_cache_spec_kind values whose blocks carry the
// main attention KV and are therefore indexed.
var indexableKinds = map[string]bool{
	"full_attention":      true,
	"mla_attention":       true,
	"sink_full_attention": true,
}

// Indexable applies Dynamo's hybrid-model filter: when SpecKind is present
// it must be full_attention, mla_attention or sink_full_attention;
// otherwise, when GroupIdx is present it must be 0. Events that are not
// indexable are to be ignored by the indexer. AllBlocksCleared is always
// indexable.
func (e *Event) Indexable() bool {
	if e.Kind == KindAllBlocksCleared {
		return true
	}
	if e.SpecKind != "" {
		return indexableKinds[e.SpecKind]
	}
	return !e.HasGroupIdx || e.GroupIdx == 0
}

// reset clears e for reuse, keeping the backing arrays of its slices.
func (e *Event) reset() {
	*e = Event{
		BlockHashes: e.BlockHashes[:0],
		TokenIDs:    e.TokenIDs[:0],
	}
}

// Batch is one decoded KVEventBatch.
type Batch struct {
	// TS is the publisher's wall-clock time (seconds since the epoch).
	TS float64
	// Events are the decoded events in wire order, unknown tags removed.
	Events []Event
	// DPRank is the batch's data_parallel_rank (attn_dp_rank for SGLang)
	// when HasDPRank; it overrides the listener's configured rank.
	DPRank    int32
	HasDPRank bool
	// Unknown counts events with an unrecognised tag that were skipped.
	Unknown int
}

// reset prepares b for decoding into it, keeping event storage.
func (b *Batch) reset() {
	b.TS = 0
	b.Events = b.Events[:0]
	b.DPRank = 0
	b.HasDPRank = false
	b.Unknown = 0
}

// next returns a cleared event slot appended to b.Events, reusing storage
// left by previous decodes.
func (b *Batch) next() *Event {
	n := len(b.Events)
	if n < cap(b.Events) {
		b.Events = b.Events[:n+1]
	} else {
		b.Events = append(b.Events, Event{})
	}
	e := &b.Events[n]
	e.reset()
	return e
}
