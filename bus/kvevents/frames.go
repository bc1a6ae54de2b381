package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Frame-level sentinel errors. Callers drop such messages (with a warning)
// without touching their watermark.
var (
	// ErrFrameCount: a message has the wrong number of frames.
	ErrFrameCount = errors.New("kvevents: wrong frame count")
	// ErrSeqLength: the sequence frame is not exactly 8 bytes.
	ErrSeqLength = errors.New("kvevents: sequence frame is not 8 bytes")
	// ErrReplayDelimiter: a replay reply does not start with an empty
	// delimiter frame.
	ErrReplayDelimiter = errors.New("kvevents: replay reply without empty delimiter frame")
)

// ReplayEndSeq is the sequence number publishers put on the replay end
// marker (-1 as a signed 8-byte big-endian integer).
const ReplayEndSeq = math.MaxUint64

// ParseLive splits a live PUB message [topic, seq, payload]. seq is the
// 8-byte big-endian batch counter. The returned slices alias frames.
func ParseLive(frames [][]byte) (topic []byte, seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return nil, 0, nil, fmt.Errorf("%w: live message has %d frames, want 3", ErrFrameCount, len(frames))
	}
	seq, err = parseSeq(frames[1])
	if err != nil {
		return nil, 0, nil, err
	}
	return frames[0], seq, frames[2], nil
}

// ParseReplay splits one replay reply as a DEALER receives it: newer vLLM
// sends [empty, topic, seq, payload], SGLang and older vLLM
// [empty, seq, payload] (topic is then nil). A reply whose payload is empty
// is the end marker: end is true and the caller stops reading (seq is
// normally ReplayEndSeq). The returned slices alias frames.
func ParseReplay(frames [][]byte) (topic []byte, seq uint64, payload []byte, end bool, err error) {
	var seqFrame []byte
	switch len(frames) {
	case 4:
		topic, seqFrame, payload = frames[1], frames[2], frames[3]
	case 3:
		seqFrame, payload = frames[1], frames[2]
	default:
		return nil, 0, nil, false, fmt.Errorf("%w: replay reply has %d frames, want 4 (or 3)", ErrFrameCount, len(frames))
	}
	if len(frames[0]) != 0 {
		return nil, 0, nil, false, ErrReplayDelimiter
	}
	seq, err = parseSeq(seqFrame)
	if err != nil {
		return nil, 0, nil, false, err
	}
	return topic, seq, payload, len(payload) == 0, nil
}

// AppendReplayRequest appends the 8-byte big-endian start sequence that
// forms the second frame of a replay request (a DEALER sends
// [empty, AppendReplayRequest(nil, start)]).
func AppendReplayRequest(dst []byte, start uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, start)
}

// parseSeq decodes an 8-byte big-endian sequence frame.
func parseSeq(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: got %d bytes", ErrSeqLength, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}
