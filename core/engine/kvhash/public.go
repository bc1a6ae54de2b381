package kvhash

import (
	"encoding/binary"
	"slices"

	"github.com/zeebo/xxh3"
)

// Seed is the base seed of the public-xxh3-v1 scheme and the chain seed of
// its sequence hashes (Dynamo's XXH3_SEED / CHAIN_XXH3_SEED).
const Seed uint64 = 1337

// MaxInlineMM is the number of multimodal hashes per block that BlockHash
// sorts in a fixed stack array. Blocks with more multimodal objects are still
// hashed correctly but cost one allocation for the sorted copy.
const MaxInlineMM = 32

// scratchBytes is the size of the on-stack buffer a block window is
// serialised into before hashing. Windows up to 128 tokens (plus a few
// multimodal hashes) take this path.
const scratchBytes = 640

// largeScratchBytes is the second tier: windows up to 1024 tokens are
// serialised into a larger stack buffer (kept out of the common path because
// zeroing it costs tens of nanoseconds). Longer windows are streamed, which
// costs one allocation (the seeded secret of the streaming hasher).
const largeScratchBytes = 4096

// chunkBytes is the size of the buffer used to feed long windows to the
// streaming hasher.
const chunkBytes = 256

// BlockSeed returns the public-xxh3-v1 block seed for a LoRA adapter name and
// a cache salt (cache namespace):
//
//	1337 + XXH3-64(lora, seed 0) + XXH3-64(salt, seed 1)   (wrapping u64)
//
// An empty string counts as absent and contributes nothing, so
// BlockSeed("", "") == Seed.
func BlockSeed(loraName, cacheSalt string) uint64 {
	s := Seed
	if loraName != "" {
		s += xxh3.HashStringSeed(loraName, 0)
	}
	if cacheSalt != "" {
		s += xxh3.HashStringSeed(cacheSalt, 1)
	}
	return s
}

// BlockHash hashes one block window with the given seed: the tokens as
// little-endian u32 values, then mm (the block's multimodal hashes) sorted
// ascending as little-endian u64 values.
//
// mm is never modified. The call does not allocate for windows up to 1024
// tokens with at most MaxInlineMM multimodal hashes.
func BlockHash(window []uint32, seed uint64, mm []uint64) uint64 {
	n := 4*len(window) + 8*len(mm)
	if n <= scratchBytes && len(mm) <= MaxInlineMM {
		var buf [scratchBytes]byte
		off := putSortedMM(buf[:], putTokens(buf[:], window), mm)
		return xxh3.HashSeed(buf[:off], seed)
	}
	if n <= largeScratchBytes && len(mm) <= MaxInlineMM {
		return largeBlockHash(window, seed, mm)
	}
	return streamBlockHash(window, seed, mm)
}

// largeBlockHash is BlockHash for windows that fit largeScratchBytes.
func largeBlockHash(window []uint32, seed uint64, mm []uint64) uint64 {
	var buf [largeScratchBytes]byte
	off := putSortedMM(buf[:], putTokens(buf[:], window), mm)
	return xxh3.HashSeed(buf[:off], seed)
}

// putTokens writes window as little-endian u32 values at the start of buf (which must hold
// them) and returns the offset after them.
func putTokens(buf []byte, window []uint32) int {
	off := 0
	for _, t := range window {
		binary.LittleEndian.PutUint32(buf[off:], t)
		off += 4
	}
	return off
}

// putSortedMM writes mm (at most MaxInlineMM values, which must fit in buf
// after off) in ascending order as little-endian u64 and returns the new
// offset.
func putSortedMM(buf []byte, off int, mm []uint64) int {
	if len(mm) == 0 {
		return off
	}
	var tmp [MaxInlineMM]uint64
	s := tmp[:copy(tmp[:], mm)]
	// Insertion sort: mm lists are tiny (usually one image per block).
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	for _, h := range s {
		binary.LittleEndian.PutUint64(buf[off:], h)
		off += 8
	}
	return off
}

// streamBlockHash is BlockHash for windows too long for the scratch buffer.
// The streaming hasher produces the same value as the one-shot function.
func streamBlockHash(window []uint32, seed uint64, mm []uint64) uint64 {
	var h xxh3.Hasher
	h.ResetSeed(seed)
	var chunk [chunkBytes]byte
	off := 0
	for _, t := range window {
		if off == chunkBytes {
			_, _ = h.Write(chunk[:off])
			off = 0
		}
		binary.LittleEndian.PutUint32(chunk[off:], t)
		off += 4
	}
	sorted := mm
	if !slices.IsSorted(mm) {
		sorted = slices.Clone(mm)
		slices.Sort(sorted)
	}
	for _, v := range sorted {
		if off+8 > chunkBytes {
			_, _ = h.Write(chunk[:off])
			off = 0
		}
		binary.LittleEndian.PutUint64(chunk[off:], v)
		off += 8
	}
	_, _ = h.Write(chunk[:off])
	return h.Sum64()
}

// BlockCount returns how many complete blocks BlockHashes produces for n
// tokens: n/blockSize, or (n-1)/blockSize for Eagle layouts. It is 0 when
// blockSize <= 0 or n == 0.
func BlockCount(n, blockSize int, eagle bool) int {
	if blockSize <= 0 || n <= 0 {
		return 0
	}
	if eagle {
		return (n - 1) / blockSize
	}
	return n / blockSize
}

// BlockHashes appends to dst the hash (BlockHash with seed) of every complete
// block of tokens and returns the extended slice. Block i covers
// tokens[i*blockSize : i*blockSize+blockSize], or one token more for Eagle
// layouts (window blockSize+1, stride blockSize). mm may be nil; otherwise
// mm(i) returns block i's multimodal hashes (nil for none) and must not
// retain or modify its result.
//
// blockSize <= 0 appends nothing. The call allocates only to grow dst.
func BlockHashes(dst []uint64, tokens []uint32, blockSize int, seed uint64, eagle bool, mm func(i int) []uint64) []uint64 {
	n := BlockCount(len(tokens), blockSize, eagle)
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	width := blockSize
	if eagle {
		width++
	}
	for i := 0; i < n; i++ {
		start := i * blockSize
		var m []uint64
		if mm != nil {
			m = mm(i)
		}
		dst = append(dst, BlockHash(tokens[start:start+width], seed, m))
	}
	return dst
}

// ChainHash returns the sequence hash of a block given its parent's sequence
// hash: XXH3-64(LE64(parent) || LE64(block), chainSeed).
func ChainHash(parent, block, chainSeed uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[0:], parent)
	binary.LittleEndian.PutUint64(buf[8:], block)
	return xxh3.HashSeed(buf[:], chainSeed)
}

// SequenceHashes appends to dst the sequence (tracking) hash chain of blocks
// and returns the extended slice: seq[0] = blocks[0] and
// seq[i] = ChainHash(seq[i-1], blocks[i], chainSeed). The public scheme uses
// chainSeed == Seed regardless of LoRA name or cache salt.
//
// dst and blocks may not overlap unless they are the same slice with
// len(dst) == 0 (in-place conversion is allowed).
func SequenceHashes(dst, blocks []uint64, chainSeed uint64) []uint64 {
	if len(blocks) == 0 {
		return dst
	}
	dst = slices.Grow(dst, len(blocks))
	prev := blocks[0]
	dst = append(dst, prev)
	for _, b := range blocks[1:] {
		prev = ChainHash(prev, b, chainSeed)
		dst = append(dst, prev)
	}
	return dst
}
