package engine

// Prompt normalisation tests: the token path reproduces the golden vectors of golden-hashes.md
// (public block hashes for the index, chained sequence hashes for tracking), and the hash path
// enforces spec §4.1's messages.

import (
	"slices"
	"testing"
)

// golden is one vector of golden-hashes.md (u64 values).
type golden struct {
	name      string
	tokens    []uint32
	blockSize uint32
	lora      string
	salt      string
	block     []uint64
	seq       []uint64
}

var goldenVectors = []golden{
	{name: "tokens 0..15 bs 4", tokens: toks(0, 16), blockSize: 4,
		block: []uint64{9143094415614847814, 12124091508212882195, 1088361764653601668, 16024980976528976948},
		seq:   []uint64{9143094415614847814, 9510318385840434533, 16998148715716822651, 16790386768269814709}},
	{name: "tokens 0..17 bs 4 (partial tail)", tokens: toks(0, 18), blockSize: 4,
		block: []uint64{9143094415614847814, 12124091508212882195, 1088361764653601668, 16024980976528976948},
		seq:   []uint64{9143094415614847814, 9510318385840434533, 16998148715716822651, 16790386768269814709}},
	{name: "tokens 1..32 bs 16", tokens: toks(1, 32), blockSize: 16,
		block: []uint64{16863443419780771464, 2287610619914608821},
		seq:   []uint64{16863443419780771464, 12466389667045779788}},
	{name: "lora adapter-a", tokens: toks(0, 16), blockSize: 4, lora: "adapter-a",
		block: []uint64{6665157333201000639, 11721812545976571723, 14488077642866817317, 15091969614435692781},
		seq:   []uint64{6665157333201000639, 13351519314849170528, 9730552557794562145, 5048406500823931192}},
	{name: "cache_salt tenant-a", tokens: toks(0, 16), blockSize: 4, salt: "tenant-a",
		block: []uint64{17009624042690211646, 10000672136415158886, 13984174126468215255, 18215876657075958645},
		seq:   []uint64{17009624042690211646, 18279821067719767880, 14670460953096113724, 3881330659120310699}},
	{name: "extreme token values", tokens: []uint32{100000, 4294967295, 7, 0}, blockSize: 4,
		block: []uint64{1948362209192800259}, seq: []uint64{1948362209192800259}},
}

func (g *golden) prompt() Prompt {
	p := Prompt{TokenIDs: g.tokens}
	if g.lora != "" {
		p.LoraName = ptr(g.lora)
	}
	if g.salt != "" {
		p.CacheSalt = ptr(g.salt)
	}
	return p
}

// TestNormalizeGolden: the engine's token path equals the golden vectors, both internally
// (block hashes for the index) and on the wire (select_and_reserve's signed sequence_hashes).
func TestNormalizeGolden(t *testing.T) {
	for _, g := range goldenVectors {
		t.Run(g.name, func(t *testing.T) {
			e := newEngine(t, nil)
			mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.BlockSize = ptr(g.blockSize) }))
			// Internal view: block hashes feed the index, sequence hashes the load tracker.
			pr := g.prompt()
			n, err := e.normalize(e.parts[defKey], &pr, true, true)
			noErr(t, err)
			if !slices.Equal(n.block, g.block) || !slices.Equal(n.seq, g.seq) {
				t.Fatalf("block %v seq %v\nwant block %v seq %v", n.block, n.seq, g.block, g.seq)
			}
			if n.isl != uint64(len(g.tokens)) || !n.fromTokens || n.lora != g.lora {
				t.Fatalf("isl %d fromTokens %v lora %q", n.isl, n.fromTokens, n.lora)
			}
			// Wire view: the booked tracking hashes come back as signed i64 bit patterns.
			resp, err := e.SelectAndReserve(&SelectRequest{Prompt: pr}, t0)
			noErr(t, err)
			wire := make([]int64, len(g.seq))
			for i, v := range g.seq {
				wire[i] = int64(v)
			}
			if !slices.Equal(resp.SequenceHashes, wire) || resp.ISLTokens != uint64(len(g.tokens)) || !resp.TrackPrefillTokens {
				t.Fatalf("booked %v isl %d track %v, want %v", resp.SequenceHashes, resp.ISLTokens, resp.TrackPrefillTokens, wire)
			}
		})
	}
	// A spot check of the signed wire form printed in golden-hashes.md.
	if int64(goldenVectors[0].seq[1]) != -8936425687869117083 {
		t.Fatalf("i64 reinterpretation differs from golden-hashes.md")
	}
}

// TestNormalizeTokenVariants: mm_routing_info wins over token_ids, is_eagle changes the block
// windows, and assume_kv_reuse=false draws fresh random tracking hashes.
func TestNormalizeTokenVariants(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	p := e.parts[defKey]
	g := goldenVectors[0]

	mm := Prompt{TokenIDs: toks(500, 8), MMRoutingInfo: &MMRoutingInfo{RoutingTokenIDs: toks(0, 16)}}
	n, _ := e.normalize(p, &mm, true, true)
	if !slices.Equal(n.block, g.block) || n.isl != 16 {
		t.Fatalf("routing_token_ids did not replace token_ids: %v isl %d", n.block, n.isl)
	}
	emptyMM := Prompt{TokenIDs: toks(0, 16), MMRoutingInfo: &MMRoutingInfo{}}
	n, _ = e.normalize(p, &emptyMM, true, true)
	if !slices.Equal(n.block, g.block) {
		t.Fatalf("empty routing_token_ids must fall back to token_ids")
	}
	// Multimodal hashes are mixed into their block only.
	withMM := Prompt{TokenIDs: toks(0, 16), BlockMMInfos: []*BlockExtraInfo{nil, {MMObjects: []MMObject{{MMHash: 42}}}}}
	n, _ = e.normalize(p, &withMM, true, true)
	if n.block[0] != g.block[0] || n.block[1] == g.block[1] || n.block[2] != g.block[2] {
		t.Fatalf("mm info must change exactly block 1: %v", n.block)
	}

	// Eagle windows are block_size+1 tokens with stride block_size.
	eagle := Prompt{TokenIDs: toks(0, 16), IsEagle: ptr(true)}
	n, _ = e.normalize(p, &eagle, true, true)
	if len(n.block) != 3 || n.isl != 16 {
		t.Fatalf("eagle: %d blocks (want (16-1)/4 = 3), isl %d", len(n.block), n.isl)
	}

	// Without assumed reuse the index hashes stay public while tracking hashes are fresh random
	// values per request, so two identical prompts never share live blocks.
	pr := tokenPrompt(toks(0, 16))
	a, _ := e.normalize(p, &pr, false, true)
	b, _ := e.normalize(p, &pr, false, true)
	if !slices.Equal(a.block, g.block) || len(a.seq) != 4 || slices.Equal(a.seq, g.seq) || slices.Equal(a.seq, b.seq) {
		t.Fatalf("assume_kv_reuse=false: block %v seq %v / %v", a.block, a.seq, b.seq)
	}
}

// TestNormalizeHashPath covers the precomputed-hash path and its 400 messages.
func TestNormalizeHashPath(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	// needBlocks is false for explicit reservations, which only need tracking hashes.
	isl := ptr(uint64(40))
	tests := []struct {
		name       string
		p          Prompt
		needBlocks bool
		want       string
	}{
		{"block_hashes missing", Prompt{SequenceHashes: []int64{1}, ISLTokens: isl}, true, "block_hashes is required without token_ids"},
		{"block_hashes optional for explicit bookings", Prompt{SequenceHashes: []int64{1}, ISLTokens: isl}, false, ""},
		{"sequence_hashes missing", Prompt{BlockHashes: []int64{1}, ISLTokens: isl}, true, "sequence_hashes is required without token_ids"},
		{"isl missing", Prompt{BlockHashes: []int64{1}, SequenceHashes: []int64{1}}, true, "isl_tokens is required without token_ids"},
		{"isl zero", Prompt{BlockHashes: []int64{1}, SequenceHashes: []int64{1}, ISLTokens: ptr(uint64(0))}, true, "isl_tokens must be greater than 0"},
		{"length mismatch", Prompt{BlockHashes: []int64{1, 2}, SequenceHashes: []int64{1}, ISLTokens: isl}, true, "block_hashes length 2 must match sequence_hashes length 1"},
		{"empty lists are fine", Prompt{BlockHashes: []int64{}, SequenceHashes: []int64{}, ISLTokens: isl}, true, ""},
		{"empty token_ids falls to the hash path", Prompt{TokenIDs: []uint32{}, ISLTokens: isl}, true, "block_hashes is required"},
		{"signed hashes are reinterpreted", Prompt{BlockHashes: []int64{-1}, SequenceHashes: []int64{-2}, ISLTokens: isl}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := e.normalize(e.parts[defKey], &tc.p, true, tc.needBlocks)
			if tc.want != "" {
				wantErr(t, err, ErrBadRequest, tc.want)
				return
			}
			noErr(t, err)
			if n.isl != 40 || n.fromTokens || len(n.seq) != len(tc.p.SequenceHashes) {
				t.Fatalf("normalized %+v", n)
			}
			for i, h := range tc.p.SequenceHashes {
				if n.seq[i] != uint64(h) {
					t.Fatalf("seq[%d] = %d, want bits of %d", i, n.seq[i], h)
				}
			}
		})
	}
	// Through the public API the same messages surface from every prompt-taking operation.
	bad := Prompt{BlockHashes: []int64{1}, SequenceHashes: []int64{1}, ISLTokens: ptr(uint64(0))}
	_, err := e.Select(&SelectRequest{Prompt: bad}, t0)
	wantErr(t, err, ErrBadRequest, "isl_tokens must be greater than 0")
	_, err = e.PotentialLoads(&PromptQuery{Prompt: bad})
	wantErr(t, err, ErrBadRequest, "isl_tokens must be greater than 0")
	_, err = e.OverlapScores(&PromptQuery{Prompt: bad})
	wantErr(t, err, ErrBadRequest, "isl_tokens must be greater than 0")
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("x"), WorkerID: ptr(uint64(1)), Prompt: bad}, t0)
	wantErr(t, err, ErrBadRequest, "isl_tokens must be greater than 0")
	if len(e.resv) != 0 {
		t.Fatalf("refused reservation booked")
	}
}
