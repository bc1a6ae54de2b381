package kvlisten

import (
	"fmt"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// The ZMQ frame layouts are kvevents' (the wire-format package); the listener only classifies
// every frame-level fault as ErrMalformed, which it counts and drops without touching the
// watermark.

// parseLive decodes a live PUB message [topic, seq, payload]. The returned
// payload aliases the frame. It never panics, whatever the frames hold.
func parseLive(frames [][]byte) (seq uint64, payload []byte, err error) {
	_, seq, payload, err = kvevents.ParseLive(frames)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return seq, payload, nil
}

// replayReply is one message read from the replay DEALER.
type replayReply struct {
	seq     uint64
	payload []byte
	end     bool // end marker: empty payload
}

// parseReplay decodes a message received by a DEALER from a vLLM/SGLang replay ROUTER, in
// either shape kvevents.ParseReplay accepts. An empty payload marks the end of the replay (its
// seq is normally -1 but is not checked, as Dynamo does). It never panics.
func parseReplay(frames [][]byte) (replayReply, error) {
	_, seq, payload, end, err := kvevents.ParseReplay(frames)
	if err != nil {
		return replayReply{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return replayReply{seq: seq, payload: payload, end: end}, nil
}
