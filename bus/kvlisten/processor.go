package kvlisten

import "hash/maphash"

// process is the processor goroutine: it owns the watermark, the gate buffer
// and replay, and is the only caller of Handler methods.
//
// Invariants maintained here:
//   - batches reach Handler.Apply in strictly increasing seq order within one
//     publisher incarnation (replayed batches fill [W+1, S) before S);
//   - Handler.Restarted is called before any batch of the new incarnation;
//   - l.wm only moves forward, except when a restart unsets it;
//   - with replay configured, l.lastHash is the hash of the payload applied
//     as l.wm.w whenever l.wm.set (every apply sets both; a restart unsets
//     the watermark).
//
// Phases: while the gate is closed, live batches are only buffered; when it
// opens the buffer is handled in arrival order, then the live queue.
func (l *Listener) process() {
	defer l.wg.Done()
	if gate := l.cfg.Gate; gate != nil {
		buf := gateBuffer{maxBatches: l.cfg.BufferBatches, maxBytes: l.cfg.BufferBytes}
	wait:
		for {
			select {
			case <-gate:
				break wait
			case m := <-l.in:
				ok := buf.push(m)
				l.budget.release(m.cost) // the gate buffer has its own bounds
				l.state.update(func(s *State) {
					s.Buffered = len(buf.msgs)
					if !ok {
						s.Overflowed++
					}
				})
			case <-l.ctx.Done():
				return
			}
		}
		l.state.setGateOpen()
		l.state.update(func(s *State) { s.Buffered = 0 })
		l.log.Info("kv events gate open", "buffered", len(buf.msgs))
		for _, m := range buf.msgs {
			if l.ctx.Err() != nil {
				return
			}
			l.handle(m)
		}
	}
	for {
		select {
		case m := <-l.in:
			if l.ctx.Err() != nil {
				return
			}
			l.handle(m)
			l.budget.release(m.cost)
		case <-l.ctx.Done():
			return
		}
	}
}

// gateBuffer holds live batches while the gate is closed, bounded by count
// and payload bytes. When full it refuses the newest batch (see the package
// documentation for why the oldest are kept).
type gateBuffer struct {
	msgs       []liveMsg
	bytes      int
	maxBatches int
	maxBytes   int
}

// push appends m and reports whether there was room.
func (b *gateBuffer) push(m liveMsg) bool {
	if len(b.msgs) >= b.maxBatches || b.bytes+len(m.payload) > b.maxBytes {
		return false
	}
	b.msgs = append(b.msgs, m)
	b.bytes += len(m.payload)
	return true
}

// handle applies the sequence and restart rules to one live batch. The
// verdict comes from the pure classify; handle only performs the side
// effects (replay, Restarted, Apply) in the order the rules require. A
// cancelled context stops it before the final Apply so Close is not delayed
// by work whose result nobody will read.
func (l *Listener) handle(m liveMsg) {
	fresh := m.epoch != l.epoch
	l.epoch = m.epoch
	d := classify(l.wm, m.seq, fresh, l.cfg.RestartWindow)
	switch d.verdict {
	case vStale:
		l.state.update(func(s *State) { s.Stale++ })
		l.log.Debug("kv events: stale batch skipped", "seq", m.seq, "watermark", l.wm.w)
		return
	case vRestart:
		l.restart(m.seq, "sequence went backwards")
		if m.seq > 0 {
			l.repair(0, m.seq, false)
		}
	case vGap:
		l.repair(d.from, m.seq, true)
	case vApply:
		if fresh && l.wm.set && l.rp != nil {
			// Restart rule 3: after a reconnect, even a contiguous
			// batch may come from a new incarnation; probe seq W.
			l.repair(m.seq, m.seq, true)
		}
	}
	if l.ctx.Err() != nil {
		return
	}
	l.apply(m.seq, m.payload, false)
}

// repair fills [from, to) from the replay endpoint, applying the batches in
// that range in order with replayed=true. With verify (and a known payload
// hash for W == from-1) it asks from W instead and checks that the engine's
// batch W is the one we applied (restart rule 3). from == to with verify is a
// pure probe. Missing batches are counted as lost and logged; nothing here is
// fatal.
func (l *Listener) repair(from, to uint64, verify bool) {
	if from < to {
		l.state.update(func(s *State) { s.Gaps++ })
	}
	if l.rp == nil {
		if from < to {
			l.state.update(func(s *State) { s.Lost += to - from })
			l.log.Warn("kv events: batches lost (no replay endpoint)", "from", from, "to", to, "count", to-from)
		}
		return
	}
	verifying := verify && l.wm.set && from > 0 && l.wm.w == from-1
	start := from
	if verifying {
		start = l.wm.w
	} else if from >= to {
		return
	}
	// The callback applies batches and so moves l.wm; the probe must
	// compare against W as it was when the request was made.
	wAtStart, hashAtStart := l.wm.w, l.lastHash
	// next is the lowest seq of the gap not yet applied (or skipped as
	// undecodable); the replay is complete when next reaches to.
	next := from
	restarted := false
	l.state.update(func(s *State) { s.Replays++ })
	ended, err := l.rp.fetch(l.ctx, start, func(seq uint64, payload []byte) bool {
		if verifying {
			verifying = false
			if seq == wAtStart {
				if maphash.Bytes(l.seed, payload) != hashAtStart {
					restarted = true
					return false
				}
				return next < to
			}
			// The engine no longer holds W: inconclusive, trust the stream.
		}
		if seq < next {
			return true
		}
		if seq >= to {
			return false
		}
		if seq > next {
			l.state.update(func(s *State) { s.Lost += seq - next })
			l.log.Warn("kv events: replay skipped batches", "from", next, "to", seq)
		}
		l.apply(seq, payload, true)
		next = seq + 1
		return next < to
	})
	if l.ctx.Err() != nil {
		return
	}
	if restarted {
		l.restart(to, "replayed batch differs from the one applied")
		if to > 0 {
			l.repair(0, to, false)
		}
		return
	}
	if next < to || err != nil {
		l.state.update(func(s *State) {
			s.ReplayFails++
			if next < to {
				s.Lost += to - next
			}
		})
		l.log.Warn("kv events: replay incomplete", "from", from, "to", to, "next", next, "ended", ended, "err", err)
	}
}

// apply hands one batch to the handler and advances the watermark on
// success.
func (l *Listener) apply(seq uint64, payload []byte, replayed bool) {
	if err := l.cfg.Handler.Apply(seq, payload, replayed); err != nil {
		var n uint64
		l.state.update(func(s *State) { s.Undecodable++; n = s.Undecodable })
		if n&(n-1) == 0 {
			l.log.Warn("kv events: undecodable batch", "seq", seq, "replayed", replayed, "count", n, "err", err)
		}
		return
	}
	l.wm = watermark{set: true, w: seq}
	if l.rp != nil {
		l.lastHash = maphash.Bytes(l.seed, payload)
	}
	l.state.update(func(s *State) {
		s.Batches++
		if replayed {
			s.Replayed++
		}
		s.Watermark, s.HasWatermark = seq, true
	})
}

// restart records a new publisher incarnation revealed by seq, tells the
// handler, and unsets the watermark.
func (l *Listener) restart(seq uint64, why string) {
	prev := l.wm.w
	l.log.Warn("kv events: publisher restarted", "prev_watermark", prev, "seq", seq, "reason", why)
	l.state.update(func(s *State) {
		s.Restarts++
		s.Watermark, s.HasWatermark = 0, false
	})
	l.cfg.Handler.Restarted(prev, seq)
	l.wm = watermark{}
}
