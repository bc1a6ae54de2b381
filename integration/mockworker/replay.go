package mockworker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ErrReplayRequest: a replay request does not have vLLM's shape. Requests from outside are
// untrusted bytes; a malformed one is counted and ignored, never answered.
var ErrReplayRequest = errors.New("mockworker: malformed replay request")

// replayEndSeq is the end marker's sequence (−1 as a signed 8-byte big-endian integer).
var replayEndSeq = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ParseReplayRequest checks a message as a ROUTER receives it from vLLM's replay clients:
// exactly [identity, empty delimiter, start_seq as 8-byte big-endian] (a DEALER sends the
// last two frames; a REQ adds the delimiter itself). It returns the identity (aliasing
// frames) and start sequence. Errors wrap ErrReplayRequest.
func ParseReplayRequest(frames [][]byte) (id []byte, start uint64, err error) {
	switch {
	case len(frames) != 3:
		return nil, 0, fmt.Errorf("%w: %d frames, want 3", ErrReplayRequest, len(frames))
	case len(frames[1]) != 0:
		return nil, 0, fmt.Errorf("%w: delimiter frame is not empty", ErrReplayRequest)
	case len(frames[2]) != 8:
		return nil, 0, fmt.Errorf("%w: start frame has %d bytes, want 8", ErrReplayRequest, len(frames[2]))
	}
	return frames[0], binary.BigEndian.Uint64(frames[2]), nil
}

// serveReplay answers replay requests until ctx ends. For a request from start it sends
// [id, "", topic, seq, payload] for every buffered batch with seq ≥ start, oldest first, then
// [id, "", "", 0xff×8, ""] (the newer vLLM reply shape). Requests are served one at a time,
// like vLLM's publisher thread; a reader that went away simply stops receiving.
func (p *publisher) serveReplay(ctx context.Context) {
	defer p.wg.Done()
	for {
		msg, err := p.router.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A peer went away mid-message; keep serving, but never spin on a socket that
			// keeps failing.
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if msg.Type != zmq4.UsrMsg {
			continue
		}
		id, start, err := ParseReplayRequest(msg.Frames)
		if err != nil {
			p.mu.Lock()
			p.stats.BadReplays++
			p.mu.Unlock()
			p.log.Debug("mockworker: ignoring replay request", "err", err)
			continue
		}
		p.mu.Lock()
		p.stats.Replays++
		p.mu.Unlock()
		id = append([]byte(nil), id...)
		var seqb [8]byte
		for _, r := range p.records(start) {
			binary.BigEndian.PutUint64(seqb[:], r.Seq)
			if err := p.router.SendMulti(zmq4.NewMsgFrom(id, nil, p.topic, seqb[:], r.Payload)); err != nil {
				break
			}
		}
		_ = p.router.SendMulti(zmq4.NewMsgFrom(id, nil, nil, replayEndSeq[:], nil))
	}
}
