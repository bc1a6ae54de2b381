package bus

import (
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"time"
)

// PublishLifecycle queues ev for publication to the cluster and returns at
// once: it never blocks on the network or on a full queue (a full queue,
// or a closed Replicator, drops the event and counts it in
// Stats.Lifecycle.OutboundDropped).
//
// Ownership: PublishLifecycle takes ev; the caller must not read or modify
// it (or its Add data) afterwards. Sender and BootID are overwritten with
// this replica's identity.
func (r *Replicator) PublishLifecycle(ev *Lifecycle) { r.enqueueOut(ev, &r.st.lifecycle) }

// PublishLiveSet queues a live-set chunk on the lifecycle subject, in order with this
// replica's lifecycle events, with PublishLifecycle's non-blocking and ownership rules (it is
// counted with the lifecycle stream).
func (r *Replicator) PublishLiveSet(ls *LiveSet) { r.enqueueOut(ls, &r.st.lifecycle) }

// PublishResyncRequest asks replica target to republish its admissions, on the lifecycle
// subject, with PublishLifecycle's non-blocking rules.
func (r *Replicator) PublishResyncRequest(target string) {
	r.enqueueOut(&ResyncRequest{Target: target}, &r.st.lifecycle)
}

// PublishAffinity is PublishLifecycle for affinity bindings, with the same
// non-blocking and ownership rules.
func (r *Replicator) PublishAffinity(a *Affinity) { r.enqueueOut(a, &r.st.affinity) }

func (r *Replicator) enqueueOut(m Message, c *streamCounters) {
	r.sendMu.RLock()
	defer r.sendMu.RUnlock()
	if r.closed {
		c.outboundDropped.Add(1)
		return
	}
	select {
	case r.out <- m:
	default:
		c.outboundDropped.Add(1)
	}
}

// publishLoop is the publisher goroutine: the only user of enc, the only
// goroutine that publishes, so this replica's messages leave in queue order.
// It sends a heartbeat at once and then every interval ±10%, expiring
// silent members on each tick. rng is owned by this goroutine.
func (r *Replicator) publishLoop(rng *mrand.Rand) {
	defer close(r.pubDone)
	p := publisher{r: r, enc: NewEncoder()}
	p.heartbeat(false)
	timer := time.NewTimer(r.jittered(rng))
	defer timer.Stop()
	for {
		select {
		case <-r.stopPub:
			// Close fenced off new submissions; publish what is queued.
			for {
				select {
				case m := <-r.out:
					p.send(m)
					continue
				default:
				}
				break
			}
			p.heartbeat(true)
			return
		case m := <-r.out:
			p.send(m)
		case <-timer.C:
			p.heartbeat(false)
			now := time.Now()
			if !transportConnected(r.tr) {
				// Cut off from the bus ourselves (NATS down, or reconnecting): silence says
				// nothing about the peers, so nobody expires until a full interval after the
				// connection is back.
				p.offlineUntil = now
			} else {
				r.expireMembers(now, p.offlineUntil)
			}
			timer.Reset(r.jittered(rng))
		}
	}
}

// jittered returns the heartbeat interval ±10%.
func (r *Replicator) jittered(rng *mrand.Rand) time.Duration {
	iv := r.cfg.HeartbeatInterval
	span := int64(iv / 5)
	if span <= 0 {
		return iv
	}
	return iv - iv/10 + time.Duration(rng.Int64N(span+1))
}

// publisher holds the publish goroutine's state.
type publisher struct {
	r       *Replicator
	enc     *Encoder
	failing bool // last publish failed; log only on transitions
	// offlineUntil is the last tick at which the transport was disconnected (zero: never).
	offlineUntil time.Time
}

// ConnectionState is implemented by transports that know whether they are connected
// ([NATSTransport], [MemTransport]); others count as always connected.
type ConnectionState interface {
	Connected() bool
}

func transportConnected(tr Transport) bool {
	if cs, ok := tr.(ConnectionState); ok {
		return cs.Connected()
	}
	return true
}

func (p *publisher) heartbeat(leaving bool) {
	p.send(&Heartbeat{HTTPAddr: p.r.cfg.HTTPAddr, StartedAt: p.r.startedAt, Leaving: leaving, Aliases: p.r.cfg.Aliases})
}

// send stamps m with this replica's identity, encodes and publishes it,
// counting the outcome.
func (p *publisher) send(m Message) {
	r := p.r
	m.setOrigin(r.cfg.ReplicaID, r.boot)
	c, subject, v1 := &r.st.heartbeats, r.ownMembers, r.subjects.Members()
	switch msgKinds[m.Type()].stream {
	case kindLifecycle:
		c, subject, v1 = &r.st.lifecycle, r.ownLifecycle, r.subjects.Lifecycle()
	case kindAffinity:
		c, subject, v1 = &r.st.affinity, r.ownAffinity, r.subjects.Affinity()
	}
	data, err := p.enc.Encode(m)
	if err == nil {
		err = r.tr.Publish(subject, data)
	}
	if err == nil && r.cfg.LegacyV1 {
		err = r.tr.Publish(v1, data) // the same envelope for replicas that speak only v1
	}
	if err != nil {
		c.publishErrors.Add(1)
		if !p.failing {
			p.failing = true
			r.log.Warn("publishing to the cluster fails; events are dropped until it recovers",
				"type", m.Type(), "err", err, "disconnected", errors.Is(err, ErrDisconnected))
		}
		return
	}
	c.published.Add(1)
	if p.failing {
		p.failing = false
		r.log.Info("publishing to the cluster recovered")
	}
}

// expireMembers runs membership expiry and queues the resulting changes
// (and, with DiscoverPeers, the implied loss of peers) for the dispatcher.
func (r *Replicator) expireMembers(now, floor time.Time) {
	r.orderMu.Lock()
	defer r.orderMu.Unlock()
	r.mu.Lock()
	changes := r.members.ExpireSince(now, floor)
	r.mu.Unlock()
	for i := range changes {
		r.logLimit.Log(r.log, slog.LevelInfo, "member expired", "member", changes[i].Member.ID, "boot", changes[i].Member.BootID)
		r.enqueueControl(inbound{change: &changes[i]})
	}
}
