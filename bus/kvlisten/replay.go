package kvlisten

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// replayer requests batches from an engine's ROUTER replay endpoint. It holds
// no socket between requests: every fetch dials a fresh DEALER and closes it
// when done, so replies that arrive after a request was abandoned (timeout,
// early stop) can never be mistaken for the answer to the next request.
// A replayer is used only by the processor goroutine.
type replayer struct {
	ep      string
	timeout time.Duration
	// maxMessage bounds each inbound message (Config.MaxMessageBytes).
	maxMessage int
	log        *slog.Logger
	// onMalformed is called for every reply that parseReplay rejects.
	onMalformed func(error)
}

// fetch asks for every buffered batch with seq >= start and calls fn for each
// reply, in the order received, until fn returns false (the caller has what
// it needs), the end marker arrives (ended == true) or the engine is silent
// for r.timeout. The dial is bounded by r.timeout too. Errors wrap ErrReplay,
// or are ctx.Err() when ctx ended. fn may retain the payload.
func (r *replayer) fetch(ctx context.Context, start uint64, fn func(seq uint64, payload []byte) bool) (ended bool, err error) {
	s, err := dialSocket(ctx, zmq4.NewDealer, r.ep, r.timeout, r.maxMessage, r.log, nil)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	defer s.closeAndDrain()

	// vLLM's ROUTER expects [identity, empty, start]; the DEALER supplies
	// the identity, we supply the delimiter and the 8-byte start.
	if err := s.SendMulti(zmq4.NewMsgFrom([]byte{}, kvevents.AppendReplayRequest(nil, start))); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("%w: send request to %s: %w", ErrReplay, r.ep, err)
	}

	// Inactivity watchdog: cancelling the socket context unblocks Recv.
	idle := time.AfterFunc(r.timeout, s.cancel)
	defer idle.Stop()
	for {
		msg, err := s.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("%w: %s silent for %v: %w", ErrReplay, r.ep, r.timeout, err)
		}
		idle.Reset(r.timeout)
		if msg.Type != zmq4.UsrMsg {
			continue
		}
		rep, err := parseReplay(msg.Frames)
		if err != nil {
			if r.onMalformed != nil {
				r.onMalformed(err)
			}
			continue
		}
		if rep.end {
			return true, nil
		}
		if !fn(rep.seq, rep.payload) {
			return false, nil
		}
	}
}
