package kvevents

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// Golden payloads. The first group is copied byte for byte from
// shared/reference/kv-events-wire-format.md §1.11 (what vLLM emits); the
// rest cover every shape listed in §7 and were produced with
// python3-msgpack 1.0.3 (whose defaults match msgspec, §6.1) from the
// literal Python values noted next to each.
const (
	hTok   = "94 ce0002505c cd0368 ccc6 cd2368"  // [151644, 872, 198, 9064]
	hHash  = "91 cf dab89baa7b5857c0"            // [15760518052499183552]
	hBatch = "93 cb 41 d9 54 fc 40 20 00 00 91 " // [1700000000.5, [<event>], ...
)

// golden1_11Map is the 197-byte current-vLLM payload (map event,
// positional batch).
const golden1_11Map = `93 cb 41 d9 54 fc 40 20 00 00 91 8b
 a4 74797065 ab 426c6f636b53746f726564
 ac 626c6f636b5f686173686573 91 cf dab89baa7b5857c0
 b1 706172656e745f626c6f636b5f68617368 c0
 a9 746f6b656e5f696473 94 ce0002505c cd0368 ccc6 cd2368
 aa 626c6f636b5f73697a65 04
 a7 6c6f72615f6964 c0
 a6 6d656469756d a3 475055
 a9 6c6f72615f6e616d65 c0
 aa 65787472615f6b657973 91 c0
 a9 67726f75705f696478 00
 b2 6b765f63616368655f737065635f6b696e64 ae 66756c6c5f617474656e74696f6e
 00`

const (
	tokStored = 151644
	hashH     = 15760518052499183552
	negHash   = -2360060374177730597
)

var toks = []uint32{151644, 872, 198, 9064}
var toks2 = []uint32{151644, 872, 198, 9064, 151644, 872, 198, 9064}

type goldenDecode struct {
	name string
	hex  string
	want Batch
}

var goldenDecodes = []goldenDecode{
	{"1.11 map event (current vLLM)", golden1_11Map, Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{
		Kind: KindBlockStored, BlockHashes: []uint64{hashH}, TokenIDs: toks, BlockSize: 4,
		HasGroupIdx: true, SpecKind: "full_attention"}}}},
	{"1.11 legacy 7-element array", "93 cb41d954fc40200000 91 97 ab426c6f636b53746f726564 91cfdab89baa7b5857c0 c0 94ce0002505ccd0368ccc6cd2368 04 c0 a3475055 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{hashH}, TokenIDs: toks, BlockSize: 4}}}},
	{"1.11 map BlockRemoved", hBatch + "83 a474797065 ac426c6f636b52656d6f766564 ac626c6f636b5f686173686573 91cfdab89baa7b5857c0 a66d656469756d a3475055 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindBlockRemoved, BlockHashes: []uint64{hashH}}}}},
	{"1.11 map AllBlocksCleared", hBatch + "81 a474797065 b0416c6c426c6f636b73436c6561726564 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindAllBlocksCleared}}}},
	{"1.11 array AllBlocksCleared", hBatch + "91 b0416c6c426c6f636b73436c6561726564 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindAllBlocksCleared}}}},
	{"1.11 array BlockRemoved 3-element", hBatch + "93 ac426c6f636b52656d6f766564 91cfdab89baa7b5857c0 a3475055 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindBlockRemoved, BlockHashes: []uint64{hashH}}}}},
	{"1.11 SGLang negative hash", hBatch + "93 ac426c6f636b52656d6f766564 91 d3df3f619804a92fdb a3475055 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindBlockRemoved, BlockHashes: []uint64{u(negHash)}}}}},
	{"1.11 byte hash c4 20", hBatch + "93 ac426c6f636b52656d6f766564 91 c420 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f a3475055 00",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{Kind: KindBlockRemoved, BlockHashes: []uint64{0x18191a1b1c1d1e1f}}}}},

	// [1700000000.5, [["BlockStored",[H],None,toks,4,None,"GPU","adapter-a",[None]]], 0]
	{"array 9-element (lora_name, extra_keys)", "93cb41d954fc402000009199ab426c6f636b53746f72656491cfdab89baa7b5857c0c094ce0002505ccd0368ccc6cd236804c0a3475055a9616461707465722d6191c000",
		Batch{TS: 1700000000.5, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{hashH}, TokenIDs: toks, BlockSize: 4, LoraName: "adapter-a"}}}},
	// [1700000000.5, [["BlockStored",[H,7],12345,toks*2,4,None,"CPU",None,[None,None],1,"sliding_window",4096]], 3]
	{"array 12-element (group, kind, window)", "93cb41d954fc40200000919cab426c6f636b53746f72656492cfdab89baa7b5857c007cd303998ce0002505ccd0368ccc6cd2368ce0002505ccd0368ccc6cd236804c0a3435055c092c0c001ae736c6964696e675f77696e646f77cd100003",
		Batch{TS: 1700000000.5, HasDPRank: true, DPRank: 3, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{hashH, 7}, Parent: 12345, HasParent: true, TokenIDs: toks2, BlockSize: 4,
			Medium: kvwire.TierHostPinned, GroupIdx: 1, HasGroupIdx: true, SpecKind: "sliding_window", SlidingWindow: 4096, HasSlidingWindow: true}}}},
	// [1700000001.25, [["BlockStored",[neg],None,toks,4,None,"GPU"], ["BlockRemoved",[neg],"CPU_PINNED"]], 1]
	{"SGLang 7-element, negative hashes", "93cb41d954fc405000009297ab426c6f636b53746f72656491d3df3f619804a92fdbc094ce0002505ccd0368ccc6cd236804c0a347505593ac426c6f636b52656d6f76656491d3df3f619804a92fdbaa4350555f50494e4e454401",
		Batch{TS: 1700000001.25, HasDPRank: true, DPRank: 1, Events: []Event{
			{Kind: KindBlockStored, BlockHashes: []uint64{u(negHash)}, TokenIDs: toks, BlockSize: 4},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{u(negHash)}, Medium: kvwire.TierHostPinned}}}},
	// [1700000001.25, [["BlockStored",[neg],-5,toks,4,None,"GPU",{"cache_salt":"tenant-a"}]], None]
	{"SGLang 8-element salted, nil rank", "93cb41d954fc405000009198ab426c6f636b53746f72656491d3df3f619804a92fdbfb94ce0002505ccd0368ccc6cd236804c0a347505581aa63616368655f73616c74a874656e616e742d61c0",
		Batch{TS: 1700000001.25, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{u(negHash)}, Parent: u(-5), HasParent: true, TokenIDs: toks, BlockSize: 4, CacheSalt: "tenant-a"}}}},
	// [2.0, [["BlockStored",[1,2],None,toks*2,4,None], ["BlockRemoved",[2]], ["AllBlocksCleared"]]]
	{"oldest SGLang / vLLM v0.9: 2-element batch, no medium", "92cb40000000000000009396ab426c6f636b53746f726564920102c098ce0002505ccd0368ccc6cd2368ce0002505ccd0368ccc6cd236804c092ac426c6f636b52656d6f766564910291b0416c6c426c6f636b73436c6561726564",
		Batch{TS: 2, Events: []Event{
			{Kind: KindBlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: toks2, BlockSize: 4},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{2}},
			{Kind: KindAllBlocksCleared}}}},
	// [3.5, [["BlockStored",[bytes(range(32))],bytes(range(8)),toks,4,None,"GPU"]], 0]
	{"byte-string hashes (32-byte and 8-byte)", "93cb400c0000000000009197ab426c6f636b53746f72656491c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc408000102030405060794ce0002505ccd0368ccc6cd236804c0a347505500",
		Batch{TS: 3.5, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{0x18191a1b1c1d1e1f}, Parent: 0x0001020304050607, HasParent: true, TokenIDs: toks, BlockSize: 4}}}},
	// [1700000000, [["BlockRemoved",[0,5,200,300,70000,2**32],"DISK"]], 0]
	{"small-int hashes of every width, int ts", "93ce6553f1009193ac426c6f636b52656d6f766564960005ccc8cd012cce00011170cf0000000100000000a44449534b00",
		Batch{TS: 1700000000, HasDPRank: true, Events: []Event{{
			Kind: KindBlockRemoved, BlockHashes: []uint64{0, 5, 200, 300, 70000, 1 << 32}, Medium: kvwire.TierDisk}}}},
	// {"ts":4.0,"events":[{"type":"AllBlocksCleared"}],"data_parallel_rank":2,"extra":[1,2]}
	{"map batch", "84a27473cb4010000000000000a66576656e74739181a474797065b0416c6c426c6f636b73436c6561726564b2646174615f706172616c6c656c5f72616e6b02a56578747261920102",
		Batch{TS: 4, HasDPRank: true, DPRank: 2, Events: []Event{{Kind: KindAllBlocksCleared}}}},
	// {"attn_dp_rank":5,"events":[["AllBlocksCleared",1,2]],"ts":4.5}
	{"map batch with attn_dp_rank, cleared with extra elements", "83ac6174746e5f64705f72616e6b05a66576656e74739193b0416c6c426c6f636b73436c65617265640102a27473cb4012000000000000",
		Batch{TS: 4.5, HasDPRank: true, DPRank: 5, Events: []Event{{Kind: KindAllBlocksCleared}}}},
	// [5.0, [["BlockStored",[9],None,[[1,2],[2,3],[3,4],[4,5]],4,None,"GPU"]], 0]
	{"Eagle bigrams", "93cb40140000000000009197ab426c6f636b53746f7265649109c09492010292020392030492040504c0a347505500",
		Batch{TS: 5, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{9}, TokenIDs: []uint32{1, 2, 3, 4, 5}, Eagle: true, BlockSize: 4}}}},
	// map event, extra_keys [[hexid,"lora-x"], [[hexid2,0],"salt",7,b"pe"]]
	{"extra_keys multimodal identifiers", "93cb40180000000000009189a474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573920a0bb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f69647398ce0002505ccd0368ccc6cd2368ce0002505ccd0368ccc6cd2368aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65a66c6f72612d78aa65787472615f6b6579739292d94061626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162a66c6f72612d789492d9403031323334353637383961626364656630303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303000a473616c7407c402706500",
		Batch{TS: 6, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{10, 11}, TokenIDs: toks2, BlockSize: 4, LoraName: "lora-x",
			MMHashes: [][]uint64{{0xabababababababab}, {0x0123456789abcdef}}}}}},
	// map event with "type" last, lower-case medium, cache_salt, locality, unknown nested key
	{"map event, type last", "93cb401c0000000000009188ac626c6f636b5f6861736865739101a66d656469756da3637075aa63616368655f73616c74a26e73a86c6f63616c697479a652454d4f5445a666757475726581a1619101a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a474797065ab426c6f636b53746f72656400",
		Batch{TS: 7, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 4,
			Medium: kvwire.TierHostPinned, CacheSalt: "ns", Locality: LocalityRemote}}}},
	// unknown tags in array and map form (type first and not first), plus Ignored
	{"unknown tags are counted and skipped", "93cb40200000000000009594ac536f6d657468696e674e65770102910393ac426c6f636b52656d6f7665649101a347505582a474797065a55765697264ac626c6f636b5f68617368657391a17891a749676e6f72656482a17801a474797065a7416c736f4e657700",
		Batch{TS: 8, HasDPRank: true, Unknown: 3, Events: []Event{{Kind: KindBlockRemoved, BlockHashes: []uint64{1}}}}},
	// hybrid-model fields: map group_idx 1, map removed group 2, array removed group 0 + "mamba"
	{"hybrid attention groups", "93cb40220000000000009389a474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739101b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f6964780184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739101a66d656469756da3475055a967726f75705f6964780295ac426c6f636b52656d6f7665649101a347505500a56d616d626100",
		Batch{TS: 9, HasDPRank: true, Events: []Event{
			{Kind: KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 4, GroupIdx: 1, HasGroupIdx: true},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, GroupIdx: 2, HasGroupIdx: true},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, HasGroupIdx: true, SpecKind: "mamba"}}}},
	// Dynamo tail by type: [...,None(lora),None(extra_keys),[{"mm_objects":[{"mm_hash":42,...}]},None],"full_attention"]
	{"Dynamo tail: block_mm_infos and kind without group", "93cb4024000000000000919bab426c6f636b53746f726564920102c098ce0002505ccd0368ccc6cd2368ce0002505ccd0368ccc6cd236804c0a3475055c0c09281aa6d6d5f6f626a656374739182a76d6d5f686173682aa76f66667365747391920002c0ae66756c6c5f617474656e74696f6e00",
		Batch{TS: 10, HasDPRank: true, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: []uint64{1, 2}, TokenIDs: toks2, BlockSize: 4,
			MMHashes: [][]uint64{{42}, nil}, SpecKind: "full_attention"}}}},
	// [11.0, [], None, "future"]
	{"4-element batch, empty events", "94cb402600000000000090c0a6667574757265", Batch{TS: 11}},
}

func TestDecodeGolden(t *testing.T) {
	var d Decoder
	var b Batch // reused across cases on purpose: storage reuse must not leak state
	for _, tc := range goldenDecodes {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.Decode(unhex(t, tc.hex), &b); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := diffBatch(&b, &tc.want, true); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// TestGolden1_11Length pins the documented size of the current-vLLM payload.
func TestGolden1_11Length(t *testing.T) {
	if n := len(unhex(t, golden1_11Map)); n != 197 {
		t.Fatalf("§1.11 payload is %d bytes, want 197", n)
	}
}

func TestIndexableGolden(t *testing.T) {
	var d Decoder
	var b Batch
	for _, tc := range []struct {
		name string
		want []bool
	}{
		{"1.11 map event (current vLLM)", []bool{true}},
		{"array 12-element (group, kind, window)", []bool{false}},
		{"hybrid attention groups", []bool{false, false, false}},
		{"Dynamo tail: block_mm_infos and kind without group", []bool{true}},
	} {
		var hexs string
		for _, g := range goldenDecodes {
			if g.name == tc.name {
				hexs = g.hex
			}
		}
		if err := d.Decode(unhex(t, hexs), &b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, want := range tc.want {
			if got := b.Events[i].Indexable(); got != want {
				t.Errorf("%s event %d: Indexable %v, want %v", tc.name, i, got, want)
			}
		}
	}
}

// goldenEncodes pin AppendBatch to bytes produced by python3-msgpack for
// the equivalent msgspec array_like structs.
var goldenEncodes = []struct {
	name string
	b    Batch
	hex  string
}{
	{
		// [1700000000.5, [["BlockStored",[H,7],12345,toks*2,4,None,"CPU_PINNED",None,None,1,"sliding_window",4096],
		//   ["BlockRemoved",[2**64+neg],"GPU",None], ["AllBlocksCleared"]], 3]
		"stored/removed/cleared",
		Batch{TS: 1700000000.5, HasDPRank: true, DPRank: 3, Events: []Event{
			{Kind: KindBlockStored, BlockHashes: []uint64{hashH, 7}, Parent: 12345, HasParent: true, TokenIDs: toks2, BlockSize: 4,
				Medium: kvwire.TierHostPinned, GroupIdx: 1, HasGroupIdx: true, SpecKind: "sliding_window", SlidingWindow: 4096, HasSlidingWindow: true},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{u(negHash)}},
			{Kind: KindAllBlocksCleared}}},
		"93cb41d954fc40200000939cab426c6f636b53746f72656492cfdab89baa7b5857c007cd303998ce0002505ccd0368ccc6cd2368ce0002505ccd0368ccc6cd236804c0aa4350555f50494e4e4544c0c001ae736c6964696e675f77696e646f77cd100094ac426c6f636b52656d6f76656491cfdf3f619804a92fdba3475055c091b0416c6c426c6f636b73436c656172656403",
	},
	{
		// [5.0, [["BlockStored",[9],None,[[1,2],[2,3]],4,None,"GPU","adapter-a",[["abab..ab"+"0"*48],None],None,None,None]], None]
		"eagle, lora, multimodal",
		Batch{TS: 5, Events: []Event{{Kind: KindBlockStored, BlockHashes: []uint64{9}, TokenIDs: []uint32{1, 2, 3}, Eagle: true, BlockSize: 4,
			LoraName: "adapter-a", MMHashes: [][]uint64{{0xabababababababab}, nil}}}},
		"93cb4014000000000000919cab426c6f636b53746f7265649109c09292010292020304c0a3475055a9616461707465722d619291d94061626162616261626162616261626162303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030c0c0c0c0c0",
	},
	{
		// [7.0, [["BlockStored",[1],None,[1,2,3,4],4,None,"EXTERNAL",None,None,0,None,None,{"cache_salt":"ns","locality":"REMOTE"}],
		//   ["BlockRemoved",[1],"DISK",2,"mamba",None]], 0]
		"metadata extension and removed tail",
		Batch{TS: 7, HasDPRank: true, Events: []Event{
			{Kind: KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 4, Medium: kvwire.TierExternal,
				HasGroupIdx: true, CacheSalt: "ns", Locality: LocalityRemote},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, Medium: kvwire.TierDisk, GroupIdx: 2, HasGroupIdx: true, SpecKind: "mamba"}}},
		"93cb401c000000000000929dab426c6f636b53746f7265649101c0940102030404c0a845585445524e414cc0c000c0c082aa63616368655f73616c74a26e73a86c6f63616c697479a652454d4f544596ac426c6f636b52656d6f7665649101a44449534b02a56d616d6261c000",
	},
}

func TestAppendBatchGolden(t *testing.T) {
	var d Decoder
	var back Batch
	for _, tc := range goldenEncodes {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendBatch([]byte{0xee}, &tc.b) // must append, not overwrite
			want := append([]byte{0xee}, unhex(t, tc.hex)...)
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendBatch:\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
			}
			if err := d.Decode(got[1:], &back); err != nil {
				t.Fatalf("decode own output: %v", err)
			}
			if diff := diffBatch(&back, &tc.b, true); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// TestAppendBatchMatchesLegacyGolden: the §1.11 batch encoded by
// AppendBatch must decode to what the §1.11 map payload decodes to (the
// encoder writes the 12-element form, which differs in bytes from both).
func TestAppendBatchMatchesLegacyGolden(t *testing.T) {
	var d Decoder
	var fromMap, fromOwn Batch
	if err := d.Decode(unhex(t, golden1_11Map), &fromMap); err != nil {
		t.Fatal(err)
	}
	if err := d.Decode(AppendBatch(nil, &fromMap), &fromOwn); err != nil {
		t.Fatal(err)
	}
	if diff := diffBatch(&fromOwn, &fromMap, true); diff != "" {
		t.Fatal(diff)
	}
}

// malformed payloads: each must fail with ErrMalformed and leave no events.
var malformed = []struct {
	name, hex string
}{
	{"empty payload", ""},
	{"truncated float", "93cb41d954"},
	{"batch of one element", "91cb41d954fc40200000"},
	{"batch is a string", "a3616263"},
	{"ts is a string", "92a17490"},
	{"events is a map", "92cb400000000000000080"},
	{"event is an int", "92cb40000000000000009101"},
	{"empty event array", "92cb40000000000000009190"},
	{"tag is an int", "92cb4000000000000000919101"},
	{"tag is nil", "92cb400000000000000091" + "91c0"},
	{"hash is a string", "92cb400000000000000091" + "92ac426c6f636b52656d6f76656491a178"},
	{"hash list is an int", "92cb400000000000000091" + "92ac426c6f636b52656d6f76656401"},
	{"negative token", "92cb400000000000000091" + "94ab426c6f636b53746f72656491" + "01" + "c0" + "91ff"},
	{"token above u32", "92cb400000000000000091" + "94ab426c6f636b53746f72656491" + "01" + "c0" + "91cf0000000100000000"},
	{"nil token", "92cb400000000000000091" + "94ab426c6f636b53746f72656491" + "01" + "c0" + "91c0"},
	{"mixed flat and bigram tokens", "92cb400000000000000091" + "94ab426c6f636b53746f72656491" + "01" + "c0" + "929201020a"},
	{"bigram of three", "92cb400000000000000091" + "94ab426c6f636b53746f72656491" + "01" + "c0" + "9193010203"},
	{"negative block size", "92cb400000000000000091" + "95ab426c6f636b53746f72656491" + "01" + "c0" + "90ff"},
	{"medium is an int", "92cb400000000000000091" + "93ac426c6f636b52656d6f7665649101" + "05"},
	{"position 7 is an int", "92cb400000000000000091" + "98ab426c6f636b53746f726564910" + "1c090" + "04c0a347505505"},
	{"rank out of int32", "93cb400000000000000090ce80000000"},
	{"negative rank", "93cb400000000000000090ff"},
	{"rank is a string", "93cb400000000000000090a130"},
	{"array32 length bomb", "92cb4000000000000000dd7fffffff"},
	{"str32 length bomb", "92cb400000000000000091" + "91db7fffffff"},
	{"map batch without events", "81a27473cb4000000000000000"},
	{"map batch duplicate events", "82a66576656e747390a66576656e747390"},
	{"map event without type", "92cb40000000000000009181a178" + "01"},
	{"empty map event", "92cb40000000000000009180"},
	{"map event with non-string key", "92cb4000000000000000918101" + "02"},
	{"trailing bytes", "92cb400000000000000090" + "00"},
	{"truncated map event", "92cb4000000000000000918ba474797065"},
}

func TestDecodeMalformed(t *testing.T) {
	var d Decoder
	var b Batch
	good := unhex(t, golden1_11Map)
	for _, tc := range malformed {
		t.Run(tc.name, func(t *testing.T) {
			// Fill b first so we can see that errors clear it.
			if err := d.Decode(good, &b); err != nil || len(b.Events) != 1 {
				t.Fatalf("setup decode: %v", err)
			}
			err := d.Decode(unhex(t, tc.hex), &b)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if len(b.Events) != 0 || b.Unknown != 0 {
				t.Fatalf("failed decode left %d events, %d unknown", len(b.Events), b.Unknown)
			}
		})
	}
}

// TestDecodeTooDeep: nesting beyond MaxDepth inside a skipped value fails
// cleanly instead of recursing without bound.
func TestDecodeTooDeep(t *testing.T) {
	var d Decoder
	var b Batch
	// [1.0, [["Unknown", [[[[...]]]] ]]]
	p := unhex(t, "92cb3ff0000000000000 91 92 a7556e6b6e6f776e")
	p = append(p, bytes.Repeat([]byte{0x91}, 100000)...)
	p = append(p, 0x01)
	err := d.Decode(p, &b)
	if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrTooDeep) {
		t.Fatalf("err = %v, want ErrMalformed wrapping ErrTooDeep", err)
	}
	// Just within the limit is fine.
	p = unhex(t, "92cb3ff0000000000000 91 92 a7556e6b6e6f776e")
	p = append(p, bytes.Repeat([]byte{0x91}, MaxDepth-3)...)
	p = append(p, 0x01)
	if err := d.Decode(p, &b); err != nil || b.Unknown != 1 {
		t.Fatalf("depth %d: err %v unknown %d", MaxDepth, err, b.Unknown)
	}
}
