package kvhash

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// naiveBlockHash is the reference: build the whole byte string with append,
// sort a copy of mm with the standard library, hash once.
func naiveBlockHash(window []uint32, seed uint64, mm []uint64) uint64 {
	var b []byte
	for _, t := range window {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	s := slices.Clone(mm)
	slices.Sort(s)
	for _, h := range s {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return xxh3.HashSeed(b, seed)
}

func naiveBlockHashes(tokens []uint32, bs int, seed uint64, eagle bool, mm func(int) []uint64) []uint64 {
	var out []uint64
	for i := 0; ; i++ {
		end := i*bs + bs
		if eagle {
			end++
		}
		if bs <= 0 || end > len(tokens) {
			return out
		}
		var m []uint64
		if mm != nil {
			m = mm(i)
		}
		out = append(out, naiveBlockHash(tokens[i*bs:end], seed, m))
	}
}

func naiveSeq(blocks []uint64, seed uint64) []uint64 {
	var out []uint64
	for i, b := range blocks {
		if i == 0 {
			out = append(out, b)
			continue
		}
		buf := binary.LittleEndian.AppendUint64(nil, out[i-1])
		buf = binary.LittleEndian.AppendUint64(buf, b)
		out = append(out, xxh3.HashSeed(buf, seed))
	}
	return out
}

// TestBlockHashMatchesNaive covers the single-shot path, the streaming path
// (long windows, > 240-byte xxh3 inputs) and the many-mm fallback.
func TestBlockHashMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 3000; iter++ {
		n := r.IntN(600)
		if iter%10 == 0 {
			n = r.IntN(3000) // well past the scratch buffer
		}
		window := make([]uint32, n)
		for i := range window {
			window[i] = r.Uint32()
		}
		mm := make([]uint64, r.IntN(4))
		if iter%50 == 0 {
			mm = make([]uint64, MaxInlineMM+r.IntN(20))
		}
		for i := range mm {
			mm[i] = r.Uint64() % 8 // force duplicates and unsorted input
		}
		before := slices.Clone(mm)
		seed := r.Uint64()
		got, want := BlockHash(window, seed, mm), naiveBlockHash(window, seed, mm)
		if got != want {
			t.Fatalf("iter %d: n=%d mm=%v: got %d want %d", iter, n, mm, got, want)
		}
		if !slices.Equal(mm, before) {
			t.Fatalf("BlockHash modified mm: %v -> %v", before, mm)
		}
	}
}

func TestBlockHashesMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 2000; iter++ {
		tokens := make([]uint32, r.IntN(300))
		for i := range tokens {
			tokens[i] = r.Uint32() % 50000
		}
		bs := r.IntN(70) - 2 // includes 0 and negatives
		eagle := r.IntN(2) == 0
		seed := r.Uint64()
		var mm func(int) []uint64
		if r.IntN(2) == 0 {
			mm = func(i int) []uint64 {
				if i%3 == 0 {
					return []uint64{uint64(i) * 7919, uint64(i)}
				}
				return nil
			}
		}
		prefix := []uint64{99}
		got := BlockHashes(slices.Clone(prefix), tokens, bs, seed, eagle, mm)
		want := append(slices.Clone(prefix), naiveBlockHashes(tokens, bs, seed, eagle, mm)...)
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d (n=%d bs=%d eagle=%v): got %v want %v", iter, len(tokens), bs, eagle, got, want)
		}
		if c := BlockCount(len(tokens), bs, eagle); c != len(want)-1 {
			t.Fatalf("BlockCount(%d,%d,%v) = %d, want %d", len(tokens), bs, eagle, c, len(want)-1)
		}
	}
}

func TestSequenceHashesMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 500; iter++ {
		blocks := make([]uint64, r.IntN(40))
		for i := range blocks {
			blocks[i] = r.Uint64()
		}
		seed := r.Uint64()
		want := naiveSeq(blocks, seed)
		if got := SequenceHashes(nil, blocks, seed); !slices.Equal(got, want) {
			t.Fatalf("got %v want %v", got, want)
		}
		// In-place conversion (documented as allowed).
		inplace := slices.Clone(blocks)
		if got := SequenceHashes(inplace[:0], inplace, seed); !slices.Equal(got, want) {
			t.Fatalf("in place: got %v want %v", got, want)
		}
	}
}

// TestEagleWindow pins the Eagle layout: windows overlap by one token.
func TestEagleWindow(t *testing.T) {
	tokens := span(0, 8) // 9 tokens, bs 4 -> 2 blocks of 5 tokens
	got := BlockHashes(nil, tokens, 4, Seed, true, nil)
	want := []uint64{BlockHash(span(0, 4), Seed, nil), BlockHash(span(4, 8), Seed, nil)}
	if !slices.Equal(got, want) {
		t.Fatalf("eagle hashes %v, want %v", got, want)
	}
	if n := len(BlockHashes(nil, span(0, 7), 4, Seed, true, nil)); n != 1 {
		t.Fatalf("8 eagle tokens at bs 4 gave %d blocks, want 1", n)
	}
}

// TestMMOrderIndependent: mm hashes are sorted, so order in the request does
// not matter, but the set does.
func TestMMOrderIndependent(t *testing.T) {
	w := span(0, 3)
	a := BlockHash(w, Seed, []uint64{3, 1, 2})
	b := BlockHash(w, Seed, []uint64{1, 2, 3})
	if a != b {
		t.Fatalf("mm order changed the hash: %d vs %d", a, b)
	}
	if a == BlockHash(w, Seed, nil) || a == BlockHash(w, Seed, []uint64{1, 2}) {
		t.Fatal("mm content did not change the hash")
	}
}

func TestBlockSeedAbsentStrings(t *testing.T) {
	if BlockSeed("", "") != Seed {
		t.Fatalf("BlockSeed of absent values = %d, want %d", BlockSeed("", ""), Seed)
	}
	lora, salt := BlockSeed("x", ""), BlockSeed("", "x")
	if lora == salt {
		t.Fatal("lora and salt with equal text must use different seeds (0 vs 1)")
	}
	if BlockSeed("x", "x") != lora+salt-Seed {
		t.Fatal("lora and salt contributions must add (wrapping)")
	}
}

func TestMMHash(t *testing.T) {
	hex64 := "0123456789abcdef" + strings.Repeat("f", 48)
	cases := []struct {
		name string
		in   string
		want uint64
	}{
		{"hex digest lower", hex64, 0x0123456789abcdef},
		{"hex digest upper", strings.ToUpper(hex64), 0x0123456789abcdef},
		{"63 hex chars", hex64[:63], xxh3.HashString(hex64[:63])},
		{"65 hex chars", hex64 + "0", xxh3.HashString(hex64 + "0")},
		{"non-hex in tail", hex64[:63] + "g", xxh3.HashString(hex64[:63] + "g")},
		{"plain identifier", "image-1", xxh3.HashStringSeed("image-1", 0)},
		{"empty", "", xxh3.HashString("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MMHash(tc.in); got != tc.want {
				t.Fatalf("MMHash(%q) = %#x, want %#x", tc.in, got, tc.want)
			}
		})
	}
}

func TestNewKeyedSchemeValidation(t *testing.T) {
	good := make([]byte, KeySize)
	cases := []struct {
		name    string
		key     []byte
		id      string
		wantErr error
		wantMsg string
	}{
		{"ok", good, "2026-01", nil, ""},
		{"short key", good[:31], "k", ErrKeySize, "router tracking key file must contain exactly 32 raw bytes; found 31"},
		{"long key", append(slices.Clone(good), 0), "k", ErrKeySize, "router tracking key file must contain exactly 32 raw bytes; found 33"},
		{"nil key", nil, "k", ErrKeySize, "router tracking key file must contain exactly 32 raw bytes; found 0"},
		{"empty id", good, "", ErrKeyID, "keyed-xxh3-v1 requires a nonempty router_tracking_key_id"},
		{"padded id", good, " k", ErrKeyID, "keyed-xxh3-v1 requires a nonempty router_tracking_key_id"},
		{"trailing newline", good, "k\n", ErrKeyID, "keyed-xxh3-v1 requires a nonempty router_tracking_key_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := NewKeyedScheme(tc.key, tc.id)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if err.Error() != tc.wantMsg {
					t.Fatalf("message %q, want %q", err.Error(), tc.wantMsg)
				}
				return
			}
			if k.KeyID() != tc.id || strings.Contains(k.String(), "\x00") {
				t.Fatalf("scheme %v", k)
			}
		})
	}
}

// TestKeyedScopeSensitivity: every scope field changes both seeds, and the
// key is copied (mutating the caller's slice afterwards has no effect).
func TestKeyedScopeSensitivity(t *testing.T) {
	key := slices.Repeat([]byte{0x23}, KeySize)
	k, _ := NewKeyedScheme(key, "2026-01")
	b0, c0 := k.Seeds("m", "g", 16, "", "", false)
	key[0] ^= 1
	if b, c := k.Seeds("m", "g", 16, "", "", false); b != b0 || c != c0 {
		t.Fatal("scheme aliases the caller's key slice")
	}
	other, _ := NewKeyedScheme(slices.Repeat([]byte{0x23}, KeySize), "2026-02")
	pair := func(b, c uint64) [2]uint64 { return [2]uint64{b, c} }
	variants := map[string][2]uint64{
		"model": pair(k.Seeds("m2", "g", 16, "", "", false)),
		"group": pair(k.Seeds("m", "g2", 16, "", "", false)),
		"bs":    pair(k.Seeds("m", "g", 32, "", "", false)),
		"ns":    pair(k.Seeds("m", "g", 16, "n", "", false)),
		"lora":  pair(k.Seeds("m", "g", 16, "", "n", false)),
		"eagle": pair(k.Seeds("m", "g", 16, "", "", true)),
		"keyid": pair(other.Seeds("m", "g", 16, "", "", false)),
		// Framing must separate fields: moving bytes between model and
		// group must not produce the same digest.
		"boundary": pair(k.Seeds("mg", "", 16, "", "", false)),
	}
	seen := map[[2]uint64]string{{b0, c0}: "base"}
	for name, v := range variants {
		if prev, dup := seen[v]; dup {
			t.Fatalf("%s collides with %s", name, prev)
		}
		seen[v] = name
	}
}
