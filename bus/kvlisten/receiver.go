package kvlisten

import (
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// liveMsg is one well-formed live batch handed from the receiver to the
// processor. epoch numbers the SUB connection it arrived on (1 for the first
// successful connection); the processor uses a change of epoch to recognise
// the first batch after a reconnect (restart rule 1).
type liveMsg struct {
	seq     uint64
	payload []byte
	epoch   uint64
	cost    int64 // bytes taken from the hand-off budget; returned by the processor
}

// receive is the receiver goroutine. It owns the SUB socket: it dials with
// unlimited retries and bounded exponential backoff, reads until the
// connection breaks, then closes the socket and starts over with a new one.
// It exits when the listener context ends.
func (l *Listener) receive() {
	defer l.wg.Done()
	var epoch uint64
	for attempt := 0; ; attempt++ {
		s, err := dialSocket(l.ctx, zmq4.NewSub, l.cfg.Endpoint, l.cfg.DialTimeout, l.cfg.MaxMessageBytes, l.log,
			func(s zmq4.Socket) error { return s.SetOption(zmq4.OptionSubscribe, l.cfg.Topic) })
		if err == nil {
			epoch++
			l.state.setConnected(true, nil)
			l.log.Info("kv events connected", "epoch", epoch)
			err = l.recvLoop(s, epoch)
			s.closeAndDrain()
			attempt = 0
		}
		if l.ctx.Err() != nil {
			return
		}
		l.state.setConnected(false, err)
		if attempt == 0 {
			l.log.Warn("kv events connection failed; retrying", "err", err)
		} else {
			l.log.Debug("kv events dial retry", "attempt", attempt, "err", err)
		}
		if !l.sleep(backoff(l.cfg.MinBackoff, l.cfg.MaxBackoff, attempt)) {
			return
		}
	}
}

// recvLoop reads live messages until Recv fails, dropping (and counting)
// malformed ones. Blocking on the hand-off (queue slots or byte budget) is
// deliberate: it pushes back through go-zeromq and TCP to the engine's PUB
// high-water mark.
func (l *Listener) recvLoop(s *zsock, epoch uint64) error {
	for {
		msg, err := s.Recv()
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrReceive, l.cfg.Endpoint, err)
		}
		if msg.Type != zmq4.UsrMsg {
			continue // ZMTP commands (e.g. PING) are not batches
		}
		seq, payload, err := parseLive(msg.Frames)
		if err != nil {
			var n uint64
			l.state.update(func(s *State) { s.Malformed++; n = s.Malformed })
			if n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... occurrence
				l.log.Warn("kv events: dropping malformed message", "count", n, "err", err)
			}
			continue
		}
		m := liveMsg{seq: seq, payload: payload, epoch: epoch, cost: min(int64(len(payload)), l.budget.size)}
		if err := l.budget.acquire(l.ctx, m.cost); err != nil {
			return err
		}
		select {
		case l.in <- m:
		case <-l.ctx.Done():
			l.budget.release(m.cost)
			return l.ctx.Err()
		}
	}
}

// backoff returns min·2^attempt, capped at max (attempt 0 → min).
func backoff(min, max time.Duration, attempt int) time.Duration {
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max || d <= 0 {
		d = max
	}
	return d
}

// sleep waits for d or until the listener context ends; it reports whether
// the full delay elapsed.
func (l *Listener) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}
