package kvlisten

import (
	"encoding/binary"
	"fmt"
)

// seqLen is the size of the sequence frame: an unsigned 64-bit big-endian
// integer, as written by Python's int.to_bytes(8, "big").
const seqLen = 8

// endSeq is the sequence number of the replay end marker: -1 as a signed
// 8-byte big-endian integer, i.e. all 0xff.
const endSeq = ^uint64(0)

// encodeSeq returns the 8-byte big-endian frame for seq.
func encodeSeq(seq uint64) []byte {
	var b [seqLen]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

// parseSeq decodes a sequence frame; it must be exactly 8 bytes.
func parseSeq(f []byte) (uint64, error) {
	if len(f) != seqLen {
		return 0, fmt.Errorf("%w: seq frame is %d bytes, want %d", ErrMalformed, len(f), seqLen)
	}
	return binary.BigEndian.Uint64(f), nil
}

// parseLive decodes a live PUB message [topic, seq, payload]. The returned
// payload aliases the frame. It never panics, whatever the frames hold.
func parseLive(frames [][]byte) (seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return 0, nil, fmt.Errorf("%w: live message has %d frames, want 3", ErrMalformed, len(frames))
	}
	seq, err = parseSeq(frames[1])
	if err != nil {
		return 0, nil, err
	}
	return seq, frames[2], nil
}

// replayReply is one message read from the replay DEALER.
type replayReply struct {
	seq     uint64
	payload []byte
	end     bool // end marker: empty payload
}

// parseReplay decodes a message received by a DEALER from a vLLM/SGLang
// replay ROUTER. Accepted shapes (the leading empty delimiter included):
//
//	[empty, topic, seq, payload]   current vLLM
//	[empty, seq, payload]          SGLang and older vLLM
//
// An empty payload marks the end of the replay (its seq is normally -1 but is
// not checked, as Dynamo does). It never panics.
func parseReplay(frames [][]byte) (replayReply, error) {
	if len(frames) == 0 || len(frames[0]) != 0 {
		return replayReply{}, fmt.Errorf("%w: replay reply lacks the empty delimiter", ErrMalformed)
	}
	var seqF, payload []byte
	switch len(frames) {
	case 4:
		seqF, payload = frames[2], frames[3]
	case 3:
		seqF, payload = frames[1], frames[2]
	default:
		return replayReply{}, fmt.Errorf("%w: replay reply has %d frames, want 3 or 4", ErrMalformed, len(frames))
	}
	seq, err := parseSeq(seqF)
	if err != nil {
		return replayReply{}, err
	}
	return replayReply{seq: seq, payload: payload, end: len(payload) == 0}, nil
}
