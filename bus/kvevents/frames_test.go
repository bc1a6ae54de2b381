package kvevents

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

func TestParseLive(t *testing.T) {
	payload := []byte{0x90}
	cases := []struct {
		name    string
		frames  [][]byte
		topic   string
		seq     uint64
		wantErr error
	}{
		// §1.11: frames for seq 0 with topic "kv-events".
		{"reference seq 0", [][]byte{unhex(t, "6b762d6576656e7473"), unhex(t, "0000000000000000"), payload}, "kv-events", 0, nil},
		{"big-endian seq", [][]byte{nil, {0, 0, 0, 0, 0, 0, 1, 2}, payload}, "", 258, nil},
		{"max seq", [][]byte{nil, bytes.Repeat([]byte{0xff}, 8), payload}, "", ReplayEndSeq, nil},
		{"two frames", [][]byte{nil, make([]byte, 8)}, "", 0, ErrFrameCount},
		{"four frames", [][]byte{nil, nil, make([]byte, 8), payload}, "", 0, ErrFrameCount},
		{"no frames", nil, "", 0, ErrFrameCount},
		{"short seq", [][]byte{nil, make([]byte, 7), payload}, "", 0, ErrSeqLength},
		{"long seq", [][]byte{nil, make([]byte, 9), payload}, "", 0, ErrSeqLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic, seq, p, err := ParseLive(tc.frames)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if string(topic) != tc.topic || seq != tc.seq || !bytes.Equal(p, payload) {
				t.Fatalf("got (%q, %d, %x)", topic, seq, p)
			}
		})
	}
}

func TestParseReplay(t *testing.T) {
	seq5 := []byte{0, 0, 0, 0, 0, 0, 0, 5}
	end := bytes.Repeat([]byte{0xff}, 8)
	cases := []struct {
		name    string
		frames  [][]byte
		topic   string
		seq     uint64
		payload string
		end     bool
		wantErr error
	}{
		{"vLLM 4-frame batch", [][]byte{{}, []byte("kv"), seq5, {0x90}}, "kv", 5, "\x90", false, nil},
		{"vLLM 4-frame end marker", [][]byte{{}, {}, end, {}}, "", ReplayEndSeq, "", true, nil},
		{"SGLang 3-frame batch", [][]byte{nil, seq5, {0x90}}, "", 5, "\x90", false, nil},
		{"SGLang 3-frame end marker", [][]byte{nil, end, nil}, "", ReplayEndSeq, "", true, nil},
		{"missing delimiter", [][]byte{[]byte("x"), []byte("kv"), seq5, {0x90}}, "", 0, "", false, ErrReplayDelimiter},
		{"two frames", [][]byte{{}, seq5}, "", 0, "", false, ErrFrameCount},
		{"five frames", [][]byte{{}, {}, {}, seq5, {0x90}}, "", 0, "", false, ErrFrameCount},
		{"short seq", [][]byte{{}, []byte("kv"), seq5[:4], {0x90}}, "", 0, "", false, ErrSeqLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic, seq, p, isEnd, err := ParseReplay(tc.frames)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if string(topic) != tc.topic || seq != tc.seq || string(p) != tc.payload || isEnd != tc.end {
				t.Fatalf("got (%q, %d, %x, end=%v)", topic, seq, p, isEnd)
			}
		})
	}
}

func TestAppendReplayRequest(t *testing.T) {
	got := AppendReplayRequest([]byte{1}, 0x0102030405060708)
	if !bytes.Equal(got, []byte{1, 1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("got %x", got)
	}
	if _, seq, _, err := ParseLive([][]byte{nil, got[1:], nil}); err != nil || seq != 0x0102030405060708 {
		t.Fatalf("round trip: %d %v", seq, err)
	}
}

func TestParseMedium(t *testing.T) {
	cases := map[string]kvwire.Tier{
		"GPU": kvwire.TierDevice, "DEVICE": kvwire.TierDevice, "": kvwire.TierDevice, "weird": kvwire.TierDevice,
		"CPU": kvwire.TierHostPinned, "cpu_pinned": kvwire.TierHostPinned, "CPU_TIER1": kvwire.TierHostPinned,
		"CPU_TIER2": kvwire.TierDisk, "Disk": kvwire.TierDisk, "NVME": kvwire.TierDisk,
		"EXTERNAL": kvwire.TierExternal, "network": kvwire.TierExternal, "REMOTE": kvwire.TierExternal, "SHARED": kvwire.TierExternal,
	}
	for in, want := range cases {
		if got := ParseMedium(in); got != want {
			t.Errorf("ParseMedium(%q) = %v, want %v", in, got, want)
		}
		if got := parseMediumBytes([]byte(in)); got != want {
			t.Errorf("parseMediumBytes(%q) = %v, want %v", in, got, want)
		}
	}
	for _, m := range []kvwire.Tier{kvwire.TierDevice, kvwire.TierHostPinned, kvwire.TierDisk, kvwire.TierExternal} {
		if ParseMedium(MediumString(m)) != m {
			t.Errorf("%v does not round-trip through its canonical string", m)
		}
	}
}

func TestIndexable(t *testing.T) {
	cases := []struct {
		name string
		e    Event
		want bool
	}{
		{"plain", Event{Kind: KindBlockStored}, true},
		{"group 0", Event{Kind: KindBlockStored, HasGroupIdx: true}, true},
		{"group 1", Event{Kind: KindBlockStored, HasGroupIdx: true, GroupIdx: 1}, false},
		{"full attention overrides group", Event{Kind: KindBlockStored, HasGroupIdx: true, GroupIdx: 3, SpecKind: "full_attention"}, true},
		{"mla", Event{Kind: KindBlockRemoved, SpecKind: "mla_attention"}, true},
		{"sink full", Event{Kind: KindBlockRemoved, SpecKind: "sink_full_attention"}, true},
		{"sliding window", Event{Kind: KindBlockStored, SpecKind: "sliding_window"}, false},
		{"mamba group 0", Event{Kind: KindBlockStored, HasGroupIdx: true, SpecKind: "mamba"}, false},
		{"cleared", Event{Kind: KindAllBlocksCleared, HasGroupIdx: true, GroupIdx: 9}, true},
	}
	for _, tc := range cases {
		if got := tc.e.Indexable(); got != tc.want {
			t.Errorf("%s: Indexable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// splitFrames turns fuzz bytes into frames: a 0x00 byte separates frames.
func splitFrames(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b, []byte{0})
}

// FuzzParseLive: whatever the frames, ParseLive never panics and accepts only 3 frames with
// an 8-byte sequence that round-trips.
func FuzzParseLive(f *testing.F) {
	f.Add([]byte("kv\x00\x01\x01\x01\x01\x01\x01\x01\x01\x00payload"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		frames := splitFrames(b)
		_, seq, payload, err := ParseLive(frames)
		if err != nil {
			return
		}
		// Accepted ⇒ exactly 3 frames, 8-byte seq that round-trips.
		if len(frames) != 3 || !bytes.Equal(AppendReplayRequest(nil, seq), frames[1]) || !bytes.Equal(payload, frames[2]) {
			t.Fatalf("accepted bad frames %q", frames)
		}
	})
}

// FuzzParseReplay: ParseReplay accepts only the two replay shapes behind an empty delimiter,
// and its end flag is exactly "empty payload".
func FuzzParseReplay(f *testing.F) {
	f.Add([]byte("\x00kv\x00\x01\x01\x01\x01\x01\x01\x01\x01\x00payload"))
	f.Add([]byte("\x00\x01\x01\x01\x01\x01\x01\x01\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		frames := splitFrames(b)
		_, seq, payload, end, err := ParseReplay(frames)
		if err != nil {
			return
		}
		if len(frames) != 3 && len(frames) != 4 || len(frames[0]) != 0 {
			t.Fatalf("accepted bad shape %q", frames)
		}
		if end != (len(payload) == 0) || !bytes.Equal(AppendReplayRequest(nil, seq), frames[len(frames)-2]) || !bytes.Equal(payload, frames[len(frames)-1]) {
			t.Fatalf("inconsistent reply seq %d payload %q end %v from %q", seq, payload, end, frames)
		}
	})
}
