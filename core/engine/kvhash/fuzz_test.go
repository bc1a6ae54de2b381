package kvhash

import (
	"strconv"
	"testing"
)

// FuzzMMHash feeds arbitrary identifiers (outside input: request mm info and
// KV-event extra keys). It must never panic, and hex digests must decode to
// the value strconv gives for their first 16 digits.
func FuzzMMHash(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	f.Add("image-1")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		got := MMHash(s)
		if v, ok := ParseHexDigest(s); ok {
			want, err := strconv.ParseUint(s[:16], 16, 64)
			if err != nil || v != want || got != want {
				t.Fatalf("hex digest %q: got %#x, parse %#x, %v", s, got, want, err)
			}
		}
	})
}

// FuzzBlockHashes drives the block splitter with arbitrary token bytes and
// block sizes; it must never panic and must agree with the naive reference.
func FuzzBlockHashes(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, false, uint64(1337))
	f.Add(make([]byte, 4000), 16, true, uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, bs int, eagle bool, seed uint64) {
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
		}
		bs %= 300
		got := BlockHashes(nil, tokens, bs, seed, eagle, nil)
		want := naiveBlockHashes(tokens, bs, seed, eagle, nil)
		if len(got) != len(want) {
			t.Fatalf("len %d want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("block %d: %d want %d", i, got[i], want[i])
			}
		}
	})
}
