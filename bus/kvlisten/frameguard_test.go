package kvlisten

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// appendFrameHeader appends a ZMTP frame header, in the short form when size fits a byte
// unless long is set.
func appendFrameHeader(dst []byte, flags byte, size uint64, long bool) []byte {
	if size > 255 || long {
		return binary.BigEndian.AppendUint64(append(dst, flags|zmtpFlagLong), size)
	}
	return append(dst, flags&^zmtpFlagLong, byte(size))
}

// frameSpec is one frame of a generated stream.
type frameSpec struct {
	flags byte
	size  uint64
	long  bool
}

// stream builds greeting + frames (bodies filled with bytes that look like headers, so a
// parser that lost its place would misread them).
func stream(frames []frameSpec) []byte {
	b := zmtpGreeting()
	for _, f := range frames {
		b = appendFrameHeader(b, f.flags, f.size, f.long)
		for range f.size {
			b = append(b, zmtpFlagLong)
		}
	}
	return b
}

// feedSplit feeds b to a fresh parser in random pieces and returns the first error and how
// many bytes were accepted before it.
func feedSplit(max uint64, b []byte, rng *rand.Rand) (int, error) {
	p := newZMTPParser(max)
	off := 0
	for off < len(b) {
		n := 1 + rng.IntN(min(len(b)-off, 97))
		if err := p.feed(b[off : off+n]); err != nil {
			return off, err
		}
		off += n
	}
	if p.state != zpFlags {
		return off, errors.New("stream ended inside a frame")
	}
	return off, nil
}

func TestZMTPParserTable(t *testing.T) {
	const max = 1000
	cases := []struct {
		name   string
		frames []frameSpec
		ok     bool
	}{
		{"empty stream", nil, true},
		{"single frame at the limit", []frameSpec{{0, max, false}}, true},
		{"single frame over the limit", []frameSpec{{0, max + 1, false}}, false},
		{"short size in the long form", []frameSpec{{0, 3, true}, {0, 0, false}}, true},
		{"multi-frame message at the limit", []frameSpec{{zmtpFlagMore, 400, false}, {zmtpFlagMore, 300, false}, {0, 300, false}}, true},
		{"multi-frame message over the limit", []frameSpec{{zmtpFlagMore, 400, false}, {zmtpFlagMore, 300, false}, {0, 301, false}}, false},
		{"messages are summed separately", []frameSpec{{zmtpFlagMore, 600, false}, {0, 400, false}, {0, max, false}}, true},
		{"standalone commands are bounded one by one", []frameSpec{{zmtpFlagCommand, 900, false}, {zmtpFlagCommand, 900, false}}, true},
		// go-zeromq joins frames into one message while MORE is set, whatever their kind.
		{"a command after a MORE frame joins the message", []frameSpec{{zmtpFlagMore, 900, false}, {zmtpFlagCommand, 900, false}}, false},
		{"commands with MORE accumulate", []frameSpec{{zmtpFlagCommand | zmtpFlagMore, 600, false}, {zmtpFlagCommand, 600, false}}, false},
		{"command frame over the limit", []frameSpec{{zmtpFlagCommand, max + 1, false}}, false},
		{"announced 2^62", []frameSpec{{0, 1 << 62, true}}, false},
		{"announced 2^64-1 after a frame", []frameSpec{{zmtpFlagMore, 10, false}, {0, 1<<64 - 1, true}}, false},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			if len(tc.frames) > 0 && tc.frames[len(tc.frames)-1].size > 1<<20 {
				// Do not materialise a huge body: the header alone must be refused.
				b = stream(tc.frames[:len(tc.frames)-1])
				last := tc.frames[len(tc.frames)-1]
				b = appendFrameHeader(b, last.flags, last.size, last.long)
			} else {
				b = stream(tc.frames)
			}
			for range 20 {
				_, err := feedSplit(max, b, rng)
				if tc.ok && err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !tc.ok && !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("err = %v, want ErrMessageTooLarge", err)
				}
			}
		})
	}
}

// TestZMTPParserRandomStreams: any stream of frames within the limit passes whatever the read
// boundaries, and a stream whose first oversized message is at frame k is refused at the header
// of the frame that crosses the limit, never earlier.
func TestZMTPParserRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const max = 700
	for i := range 2000 {
		var frames []frameSpec
		var msg uint64
		crossAt := -1
		for j := range 1 + rng.IntN(12) {
			f := frameSpec{size: uint64(rng.IntN(400)), long: rng.IntN(4) == 0}
			switch rng.IntN(4) {
			case 0:
				f.flags = zmtpFlagCommand
			case 1, 2:
				f.flags = zmtpFlagMore
			}
			msg += f.size
			if msg > max && crossAt < 0 {
				crossAt = j
			}
			if f.flags&zmtpFlagMore == 0 {
				msg = 0
			}
			frames = append(frames, f)
		}
		b := stream(frames)
		off, err := feedSplit(max, b, rng)
		if crossAt < 0 {
			if err != nil {
				t.Fatalf("stream %d: refused a stream within the limit: %v", i, err)
			}
			continue
		}
		if !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("stream %d: err = %v, want ErrMessageTooLarge at frame %d", i, err, crossAt)
		}
		// Everything before the crossing frame's header was accepted.
		before := len(stream(frames[:crossAt]))
		if off > before+9 {
			t.Fatalf("stream %d: accepted %d bytes, past the crossing header at %d", i, off, before)
		}
	}
}

// FuzzZMTPParser: arbitrary bytes never panic the parser, and where the reads split the
// stream does not change whether it is refused.
func FuzzZMTPParser(f *testing.F) {
	f.Add(stream([]frameSpec{{zmtpFlagCommand, 20, false}, {zmtpFlagMore, 5, false}, {0, 300, true}}), uint16(256), uint8(7))
	f.Add(appendFrameHeader(zmtpGreeting(), 0, 1<<62, true), uint16(1000), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, max uint16, split uint8) {
		whole := newZMTPParser(uint64(max))
		errWhole := whole.feed(b)
		pieces := newZMTPParser(uint64(max))
		var errPieces error
		step := 1 + int(split)
		for off := 0; off < len(b) && errPieces == nil; off += step {
			errPieces = pieces.feed(b[off:min(off+step, len(b))])
		}
		if (errWhole == nil) != (errPieces == nil) {
			t.Fatalf("whole: %v, in pieces of %d: %v", errWhole, step, errPieces)
		}
		if errWhole != nil && !errors.Is(errWhole, ErrMessageTooLarge) {
			t.Fatalf("unexpected error %v", errWhole)
		}
	})
}
