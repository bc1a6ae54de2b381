package mockworker

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// DefaultHashSeed seeds engine block hashes when Config.HashSeed is 0. Any value works; it only
// has to make engine hashes differ from kvselect's local hash (XXH3-64, seed 1337, unchained).
const DefaultHashSeed = 0x6d6f636b_766c6c6d // "mockvllm"

// rootHash is the "parent" of a prompt's first block for a given seed, the analogue of vLLM's
// NONE_HASH.
func rootHash(seed uint64) uint64 {
	return xxh3.HashStringSeed("kvselect-mockworker-none-hash", seed)
}

// EngineHashes appends to dst the engine hash of every full block of tokens and returns the
// extended slice. Block i's hash is XXH3-64(LE64(parent) || LE32(tokens of block i), seed),
// where parent is block i−1's hash, or rootHash(seed) for block 0. A trailing partial block
// gets no hash. blockSize must be > 0.
func EngineHashes(dst []uint64, tokens []uint32, blockSize int, seed uint64) []uint64 {
	n := len(tokens) / blockSize
	if n == 0 {
		return dst
	}
	buf := make([]byte, 8+4*blockSize)
	parent := rootHash(seed)
	for i := range n {
		binary.LittleEndian.PutUint64(buf, parent)
		for j, t := range tokens[i*blockSize : (i+1)*blockSize] {
			binary.LittleEndian.PutUint32(buf[8+4*j:], t)
		}
		parent = xxh3.HashSeed(buf, seed)
		dst = append(dst, parent)
	}
	return dst
}
