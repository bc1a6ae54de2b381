package kvhash_test

import (
	"fmt"

	"github.com/kvselect/kvselect/core/engine/kvhash"
)

// Public block and sequence hashes of a 16-token prompt with block size 4
// (the first vector of golden-hashes.md), shown as the signed integers the
// JSON wire carries.
func ExampleBlockHashes() {
	tokens := make([]uint32, 16)
	for i := range tokens {
		tokens[i] = uint32(i)
	}
	seed := kvhash.BlockSeed("", "") // no LoRA, no cache salt: 1337
	blocks := kvhash.BlockHashes(nil, tokens, 4, seed, false, nil)
	seqs := kvhash.SequenceHashes(nil, blocks, kvhash.Seed)
	fmt.Println(int64(blocks[1]), int64(seqs[3]))
	// Output: -6322652565496669421 -1656357305439736907
}
