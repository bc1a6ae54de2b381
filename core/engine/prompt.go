package engine

import (
	"github.com/kvselect/kvselect/core/engine/kvhash"
)

// Prompt carries the prompt fields that /select, /select_and_reserve, /reservations,
// /potential_loads and /overlap_scores accept (flattened into each body). Either token_ids (or
// mm_routing_info.routing_token_ids) is given and the engine hashes it, or precomputed
// block_hashes + sequence_hashes + isl_tokens are given and trusted as-is.
type Prompt struct {
	TokenIDs       []uint32          `json:"token_ids,omitempty"`
	MMRoutingInfo  *MMRoutingInfo    `json:"mm_routing_info,omitempty"`
	BlockMMInfos   []*BlockExtraInfo `json:"block_mm_infos,omitempty"`
	BlockHashes    []int64           `json:"block_hashes,omitempty"`
	SequenceHashes []int64           `json:"sequence_hashes,omitempty"`
	ISLTokens      *uint64           `json:"isl_tokens,omitempty"`
	LoraName       *string           `json:"lora_name,omitempty"`
	CacheSalt      *string           `json:"cache_salt,omitempty"`
	IsEagle        *bool             `json:"is_eagle,omitempty"`

	// pre is the prompt hashed outside the engine lock (prehash.go); never on the wire.
	pre *prehashed
}

// MMRoutingInfo is multimodal routing input: when RoutingTokenIDs is non-empty it replaces
// token_ids for hashing.
type MMRoutingInfo struct {
	RoutingTokenIDs []uint32          `json:"routing_token_ids"`
	BlockMMInfos    []*BlockExtraInfo `json:"block_mm_infos"`
}

// BlockExtraInfo is the multimodal content of one block.
type BlockExtraInfo struct {
	MMObjects []MMObject `json:"mm_objects"`
}

// MMObject is one multimodal object overlapping a block.
type MMObject struct {
	MMHash  uint64      `json:"mm_hash"`
	Offsets [][2]uint64 `json:"offsets"`
}

// MaxISLTokens bounds isl_tokens on the hash path: load sums stay far from overflow.
const MaxISLTokens = 1<<32 - 1

// normalized is a prompt reduced to what selection and booking need.
//
// Invariants: len(block) == len(seq) when both are present (hash path: checked; token path: by
// construction); isl > 0.
type normalized struct {
	block      []uint64 // public block hashes, for index lookups (may be nil: explicit bookings)
	seq        []uint64 // tracking hashes, for load accounting
	isl        uint64
	lora       string
	fromTokens bool
}

// requestBlocks is ceil(isl / block size).
func (n *normalized) requestBlocks(bs uint32) uint64 { return (n.isl + uint64(bs) - 1) / uint64(bs) }

// normalize turns prompt fields into hashes. needBlockHashes is false for explicit reservations,
// which only need tracking hashes on the hash path. The returned slices are freshly allocated and
// may be retained.
func (e *Engine) normalize(p *partition, pr *Prompt, assumeReuse, needBlockHashes bool) (normalized, error) {
	n := normalized{lora: deref(pr.LoraName, "")}
	pre := takePre(pr, p, assumeReuse)
	if err := CheckPromptSize(e.lim, pr); err != nil {
		e.bounds.RejectedTooLarge++
		return n, err
	}
	tokens, mmInfos := promptTokens(pr)
	if len(tokens) > 0 {
		if err := e.lim.checkBlocks(len(tokens), p.blockSize); err != nil {
			e.bounds.RejectedTooLarge++
			return n, err
		}
		if pre != nil && pre.tokenPath {
			return e.normalizePrehashed(pr, tokens, pre, assumeReuse), nil
		}
		return e.normalizeTokens(p, pr, tokens, mmInfos, assumeReuse), nil
	}

	if needBlockHashes && pr.BlockHashes == nil {
		return n, badRequest("block_hashes is required without token_ids")
	}
	if pr.SequenceHashes == nil {
		return n, badRequest("sequence_hashes is required without token_ids")
	}
	if pr.ISLTokens == nil {
		return n, badRequest("isl_tokens is required without token_ids")
	}
	if *pr.ISLTokens == 0 {
		return n, badRequest("isl_tokens must be greater than 0")
	}
	if *pr.ISLTokens > MaxISLTokens {
		return n, badRequest("isl_tokens must not exceed %d", uint64(MaxISLTokens))
	}
	if pr.BlockHashes != nil && len(pr.BlockHashes) != len(pr.SequenceHashes) {
		return n, badRequest("block_hashes length %d must match sequence_hashes length %d", len(pr.BlockHashes), len(pr.SequenceHashes))
	}
	n.isl = *pr.ISLTokens
	if pre != nil && !pre.tokenPath {
		n.block, n.seq = pre.block, pre.seq
		return n, nil
	}
	if pr.BlockHashes != nil {
		n.block = toU64(pr.BlockHashes)
	}
	n.seq = toU64(pr.SequenceHashes)
	return n, nil
}

// normalizePrehashed completes a token prompt hashed by Prehash: only random tracking hashes
// (assume_kv_reuse=false) are drawn here.
func (e *Engine) normalizePrehashed(pr *Prompt, tokens []uint32, pre *prehashed, assumeReuse bool) normalized {
	n := normalized{lora: deref(pr.LoraName, ""), isl: uint64(len(tokens)), fromTokens: true, block: pre.block, seq: pre.seq}
	if !assumeReuse {
		n.seq = make([]uint64, len(n.block))
		for i := range n.seq {
			n.seq[i] = e.rng.Uint64()
		}
	}
	return n
}

func (e *Engine) normalizeTokens(p *partition, pr *Prompt, tokens []uint32, mmInfos []*BlockExtraInfo, assumeReuse bool) normalized {
	n := normalized{lora: deref(pr.LoraName, ""), isl: uint64(len(tokens)), fromTokens: true}
	eagle := deref(pr.IsEagle, p.isEagle)
	salt := deref(pr.CacheSalt, "")
	bs := int(p.blockSize)
	mm := mmHashes(mmInfos)
	n.block = kvhash.BlockHashes(nil, tokens, bs, kvhash.BlockSeed(n.lora, salt), eagle, mm)
	switch {
	case !assumeReuse:
		// Without assumed reuse every block is unique to this request.
		n.seq = make([]uint64, len(n.block))
		for i := range n.seq {
			n.seq[i] = e.rng.Uint64()
		}
	case e.keyed != nil:
		blockSeed, chainSeed := p.keyedSeeds(e.keyed, salt, n.lora, eagle)
		tracked := kvhash.BlockHashes(nil, tokens, bs, blockSeed, eagle, mm)
		n.seq = kvhash.SequenceHashes(tracked[:0:0], tracked, chainSeed)
	default:
		n.seq = kvhash.SequenceHashes(nil, n.block, kvhash.Seed)
	}
	return n
}

// toU64 reinterprets signed JSON hashes as the u64 bit patterns the engine works with.
func toU64(in []int64) []uint64 {
	out := make([]uint64, len(in))
	for i, v := range in {
		out[i] = uint64(v)
	}
	return out
}

// toI64 renders u64 hashes as the signed values Dynamo puts on the JSON wire.
func toI64(in []uint64) []int64 {
	out := make([]int64, len(in))
	for i, v := range in {
		out[i] = int64(v)
	}
	return out
}

// keyedSeedKey identifies a keyed-hash scope within a partition.
type keyedSeedKey struct {
	salt, lora string
	eagle      bool
}

// keyedSeeds returns (and caches: deriving them costs a keyed BLAKE3 run) the keyed-xxh3-v1
// seeds for a scope of this partition. The cache is bounded: past 4096 scopes it is reset.
func (p *partition) keyedSeeds(k *kvhash.KeyedScheme, salt, lora string, eagle bool) (uint64, uint64) {
	key := keyedSeedKey{salt, lora, eagle}
	if s, ok := p.seeds[key]; ok {
		return s[0], s[1]
	}
	if p.seeds == nil || len(p.seeds) >= 4096 {
		p.seeds = make(map[keyedSeedKey][2]uint64)
	}
	b, c := k.Seeds(p.key.Model, p.key.Group, p.blockSize, salt, lora, eagle)
	p.seeds[key] = [2]uint64{b, c}
	return b, c
}
