package kvhash

import (
	"slices"
	"testing"
)

// goldenCase is one vector of shared/reference/golden-hashes.md, computed
// with an independent XXH3 implementation (Python xxhash). Both the u64 form
// and the i64 form seen on the JSON wire are checked in, so a bug in either
// the hash or the sign reinterpretation is caught.
type goldenCase struct {
	name      string
	tokens    []uint32
	blockSize int
	lora      string
	salt      string
	seed      uint64
	blocks    []uint64
	blocksI64 []int64
	seqs      []uint64
	seqsI64   []int64
}

func span(lo, hi uint32) []uint32 { // [lo, hi]
	var out []uint32
	for t := lo; t <= hi; t++ {
		out = append(out, t)
	}
	return out
}

var goldenCases = []goldenCase{
	{
		name: "tokens 0..15 bs4", tokens: span(0, 15), blockSize: 4, seed: 1337,
		blocks:    []uint64{9143094415614847814, 12124091508212882195, 1088361764653601668, 16024980976528976948},
		blocksI64: []int64{9143094415614847814, -6322652565496669421, 1088361764653601668, -2421763097180574668},
		seqs:      []uint64{9143094415614847814, 9510318385840434533, 16998148715716822651, 16790386768269814709},
		seqsI64:   []int64{9143094415614847814, -8936425687869117083, -1448595357992728965, -1656357305439736907},
	},
	{
		name: "tokens 0..17 bs4 trailing partial", tokens: span(0, 17), blockSize: 4, seed: 1337,
		blocks:    []uint64{9143094415614847814, 12124091508212882195, 1088361764653601668, 16024980976528976948},
		blocksI64: []int64{9143094415614847814, -6322652565496669421, 1088361764653601668, -2421763097180574668},
		seqs:      []uint64{9143094415614847814, 9510318385840434533, 16998148715716822651, 16790386768269814709},
		seqsI64:   []int64{9143094415614847814, -8936425687869117083, -1448595357992728965, -1656357305439736907},
	},
	{
		name: "tokens 1..32 bs16", tokens: span(1, 32), blockSize: 16, seed: 1337,
		blocks:    []uint64{16863443419780771464, 2287610619914608821},
		blocksI64: []int64{-1583300653928780152, 2287610619914608821},
		seqs:      []uint64{16863443419780771464, 12466389667045779788},
		seqsI64:   []int64{-1583300653928780152, -5980354406663771828},
	},
	{
		name: "lora adapter-a", tokens: span(0, 15), blockSize: 4, lora: "adapter-a", seed: 8842669519798868182,
		blocks:    []uint64{6665157333201000639, 11721812545976571723, 14488077642866817317, 15091969614435692781},
		blocksI64: []int64{6665157333201000639, -6724931527732979893, -3958666430842734299, -3354774459273858835},
		seqs:      []uint64{6665157333201000639, 13351519314849170528, 9730552557794562145, 5048406500823931192},
		seqsI64:   []int64{6665157333201000639, -5095224758860381088, -8716191515914989471, 5048406500823931192},
	},
	{
		name: "cache_salt tenant-a", tokens: span(0, 15), blockSize: 4, salt: "tenant-a", seed: 1948188790972764086,
		blocks:    []uint64{17009624042690211646, 10000672136415158886, 13984174126468215255, 18215876657075958645},
		blocksI64: []int64{-1437120031019339970, -8446071937294392730, -4462569947241336361, -230867416633592971},
		seqs:      []uint64{17009624042690211646, 18279821067719767880, 14670460953096113724, 3881330659120310699},
		seqsI64:   []int64{-1437120031019339970, -166923005989783736, -3776283120613437892, 3881330659120310699},
	},
	{
		name: "extreme token values", tokens: []uint32{100000, 4294967295, 7, 0}, blockSize: 4, seed: 1337,
		blocks:    []uint64{1948362209192800259},
		blocksI64: []int64{1948362209192800259},
		seqs:      []uint64{1948362209192800259},
		seqsI64:   []int64{1948362209192800259},
	},
}

func TestGoldenPublic(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			seed := BlockSeed(tc.lora, tc.salt)
			if seed != tc.seed {
				t.Fatalf("BlockSeed(%q,%q) = %d, want %d", tc.lora, tc.salt, seed, tc.seed)
			}
			blocks := BlockHashes(nil, tc.tokens, tc.blockSize, seed, false, nil)
			if !slices.Equal(blocks, tc.blocks) {
				t.Fatalf("block hashes = %v, want %v", blocks, tc.blocks)
			}
			if got := toI64(blocks); !slices.Equal(got, tc.blocksI64) {
				t.Fatalf("block hashes as i64 = %v, want %v", got, tc.blocksI64)
			}
			seqs := SequenceHashes(nil, blocks, Seed)
			if !slices.Equal(seqs, tc.seqs) {
				t.Fatalf("sequence hashes = %v, want %v", seqs, tc.seqs)
			}
			if got := toI64(seqs); !slices.Equal(got, tc.seqsI64) {
				t.Fatalf("sequence hashes as i64 = %v, want %v", got, tc.seqsI64)
			}
		})
	}
}

func toI64(v []uint64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// TestVerifiedXXH3Anchor pins the single value the wire-format reference
// verified against Python xxhash: tokens 1000..1015 hashed with seed 1337.
func TestVerifiedXXH3Anchor(t *testing.T) {
	got := BlockHash(span(1000, 1015), Seed, nil)
	if got != 17863182269597592868 {
		t.Fatalf("BlockHash(1000..1015) = %d, want 17863182269597592868", got)
	}
}

// TestKeyedGolden checks Dynamo's keyed-xxh3-v1 vectors
// (keyed_hash_vector_pins_scope_and_chain_framing and the multimodal/Eagle
// vectors next to it). These are tracking (sequence) hashes.
func TestKeyedGolden(t *testing.T) {
	key5a := slices.Repeat([]byte{0x5a}, KeySize)
	key41 := slices.Repeat([]byte{0x41}, KeySize)
	mm42 := func(i int) []uint64 {
		if i == 0 {
			return []uint64{42}
		}
		return nil
	}
	cases := []struct {
		name            string
		key             []byte
		model, group    string
		tokens          []uint32
		namespace, lora string
		eagle           bool
		mm              func(int) []uint64
		want            []uint64
	}{
		{
			name: "scope and chain framing", key: key5a, model: "model-a", group: "tenant-a",
			tokens: span(0, 11), namespace: "cache-a", lora: "adapter-a",
			want: []uint64{4363769719052127296, 14998523962162619427, 13920914207884994756},
		},
		{
			name: "multimodal", key: key41, model: "model", group: "default", tokens: span(0, 9), mm: mm42,
			want: []uint64{13077030603177067515, 12131634976806651614},
		},
		{
			name: "eagle", key: key41, model: "model", group: "default", tokens: span(0, 9), eagle: true,
			want: []uint64{18351479723295049348, 8577555336206814019},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := NewKeyedScheme(tc.key, "2026-01")
			if err != nil {
				t.Fatal(err)
			}
			got := k.TrackingHashes(nil, tc.tokens, tc.model, tc.group, 4, tc.namespace, tc.lora, tc.eagle, tc.mm)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("tracking hashes = %v, want %v", got, tc.want)
			}
			// The same result through the primitive API.
			bs, cs := k.Seeds(tc.model, tc.group, 4, tc.namespace, tc.lora, tc.eagle)
			blocks := BlockHashes(nil, tc.tokens, 4, bs, tc.eagle, tc.mm)
			if got2 := SequenceHashes(nil, blocks, cs); !slices.Equal(got2, tc.want) {
				t.Fatalf("Seeds+BlockHashes+SequenceHashes = %v, want %v", got2, tc.want)
			}
		})
	}
}
