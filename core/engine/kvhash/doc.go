// Package kvhash computes the block and sequence hashes that the selection
// engine keys its prefix index and its active-load bookkeeping by.
//
// Two schemes are implemented, both bit-compatible with NVIDIA Dynamo's KV
// router:
//
//   - public-xxh3-v1 (default): a block hash is XXH3-64 over the block's tokens
//     as little-endian u32 values, followed by the block's multimodal hashes
//     (sorted ascending) as little-endian u64 values, with a seed derived from
//     1337, the LoRA name and the cache salt ([BlockSeed]). The sequence
//     (tracking) hash chains block hashes: seq[0] = block[0] and
//     seq[i] = XXH3-64(LE64(seq[i-1]) || LE64(block[i]), 1337). The indexer
//     always uses the public block hashes.
//   - keyed-xxh3-v1 ([KeyedScheme]): the block seed and chain seed are derived
//     with keyed BLAKE3 from a 32-byte provider key and the routing scope, so
//     tracking hashes cannot be predicted or forged by a party without the
//     key. Keyed hashes never reach the indexer.
//
// Engines' own block hashes (the ones carried in vLLM/SGLang KV events) are
// opaque and are not produced here.
//
// Invariants:
//
//   - Only complete blocks are hashed; trailing partial blocks are ignored.
//     For Eagle (speculative-decoding bigram) layouts a block's window is
//     blockSize+1 tokens with a stride of blockSize, so the block count is
//     (len-1)/blockSize.
//   - All functions are pure, deterministic, safe for concurrent use and never
//     panic. The hot-path functions ([BlockHash], [BlockHashes],
//     [SequenceHashes]) do not allocate beyond growing the caller's dst
//     slice, for blocks of up to 1024 tokens with at most [MaxInlineMM]
//     multimodal hashes.
//   - On the JSON wire these u64 values travel as signed i64 (bit
//     reinterpretation); conversion is the caller's business.
//
// The package is part of the engine: it performs no I/O, starts no goroutines
// and reads no clock.
package kvhash
