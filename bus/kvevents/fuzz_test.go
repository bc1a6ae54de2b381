package kvevents

import (
	"encoding/hex"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary payloads (seeded with every golden and
// malformed payload). Decode must never panic; when it succeeds, the batch
// must survive AppendBatch → Decode unchanged (Unknown aside, since the
// encoder drops unknown events).
func FuzzDecode(f *testing.F) {
	seed := func(s string) {
		b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
		if err == nil {
			f.Add(b)
		}
	}
	for _, g := range goldenDecodes {
		seed(g.hex)
	}
	for _, g := range goldenEncodes {
		seed(g.hex)
	}
	for _, m := range malformed {
		seed(m.hex)
	}
	var d Decoder
	var first, second Batch
	f.Fuzz(func(t *testing.T, payload []byte) {
		if err := d.Decode(payload, &first); err != nil {
			return
		}
		enc := AppendBatch(nil, &first)
		if err := d.Decode(enc, &second); err != nil {
			t.Fatalf("re-decode of own encoding failed: %v\nenc %x", err, enc)
		}
		if diff := diffBatch(&second, &first, false); diff != "" {
			t.Fatalf("round trip changed the batch: %s\nenc %x", diff, enc)
		}
	})
}

// FuzzParseFrames: frame parsers must never panic on any frame layout.
func FuzzParseFrames(f *testing.F) {
	f.Add([]byte("kv"), []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0x90}, uint8(3))
	f.Fuzz(func(t *testing.T, a, b, c []byte, n uint8) {
		frames := [][]byte{a, b, c, a, b}[:int(n)%6]
		if _, seq, _, err := ParseLive(frames); err == nil && len(frames) != 3 {
			t.Fatalf("ParseLive accepted %d frames (seq %d)", len(frames), seq)
		}
		if _, _, p, end, err := ParseReplay(frames); err == nil && end != (len(p) == 0) {
			t.Fatalf("end marker flag %v for payload %x", end, p)
		}
	})
}
