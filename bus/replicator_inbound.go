package bus

import (
	"errors"
	"fmt"
	"time"
)

// The inbound path. Each subscription handler runs on its transport
// goroutine, one message at a time, and owns a Decoder. It decodes, drops
// echoes, non-peers and retired boots, and enqueues without blocking;
// callbacks run later on the dispatcher goroutine. The only blocking
// enqueue is for control notices (restarts, membership changes), which are
// rare and must not be lost; it gives up when the Replicator closes.
//
// Ordering: the boot/membership decision for a message and the enqueueing
// of its consequences happen under orderMu, so the queue order matches the
// order in which the Members table changed. Without it, a restarted peer's
// first event (lifecycle goroutine) could overtake the restart notice
// raised by its first heartbeat (members goroutine). orderMu is held while
// a control notice waits for queue room; that is safe because the
// dispatcher never takes orderMu.

// lifecycleHandler returns the handler of the lifecycle subscription, which carries lifecycle
// events and live sets.
func (r *Replicator) lifecycleHandler() Handler {
	dec := NewDecoder()
	c := &r.st.lifecycle
	return func(m Msg) {
		msg, err := dec.Decode(m.Data)
		var it inbound
		switch v := msg.(type) {
		case *Lifecycle:
			it.lc = v
		case *LiveSet:
			it.ls = v
		case *ResyncRequest:
			if v.Target != r.cfg.ReplicaID {
				return // addressed to another replica
			}
			it.rr = v
		default:
			if err == nil {
				err = fmt.Errorf("%w: %s on the lifecycle subject", ErrWrongType, msg.Type())
			}
		}
		if err != nil {
			r.decodeError(c, m, err)
			return
		}
		sender, boot := msg.Origin()
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		if !r.admit(c, sender, boot) {
			return
		}
		select {
		case r.inLC <- it:
			c.received.Add(1)
		default:
			c.inboundDropped.Add(1)
		}
	}
}

// affinityHandler returns the handler of the affinity subscription.
func (r *Replicator) affinityHandler() Handler {
	dec := NewDecoder()
	c := &r.st.affinity
	return func(m Msg) {
		a := &Affinity{}
		if err := dec.DecodeInto(m.Data, a); err != nil {
			r.decodeError(c, m, err)
			return
		}
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		if !r.admit(c, a.Sender, a.BootID) {
			return
		}
		select {
		case r.inAF <- a:
			c.received.Add(1)
		default:
			c.inboundDropped.Add(1)
		}
	}
}

// membersHandler returns the handler of the members subscription. Every
// replica's heartbeats are observed (membership is cluster-wide). A restart
// notice is raised for every replica seen with a new boot id, peer or not: in
// discovery mode a peer that left or expired is no longer a peer when it
// comes back, yet its earlier events were applied, and for a replica whose
// events were never applied the notice drops nothing.
func (r *Replicator) membersHandler() Handler {
	dec := NewDecoder()
	c := &r.st.heartbeats
	var hb Heartbeat
	return func(m Msg) {
		if err := dec.DecodeInto(m.Data, &hb); err != nil {
			r.decodeError(c, m, err)
			return
		}
		if hb.Sender == r.cfg.ReplicaID {
			c.echoes.Add(1)
			return
		}
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		r.mu.Lock()
		obs := r.members.Observe(&hb, time.Now())
		r.mu.Unlock()
		if obs.Verdict == BootRetired {
			c.staleBoot.Add(1)
			return
		}
		c.received.Add(1)
		if obs.Verdict == BootRestarted {
			r.notifyRestart(hb.Sender, obs.PrevBootID, hb.BootID)
		}
		if obs.Change.Kind != ChangeNone {
			ch := obs.Change
			r.log.Info("membership change", "member", ch.Member.ID, "change", ch.Kind, "boot", ch.Member.BootID)
			r.enqueueControl(inbound{change: &ch})
		}
	}
}

// admit applies the sender filters shared by lifecycle and affinity events
// and raises a restart notice (ahead of the event) when a peer's boot id
// changed. It reports whether the event should be delivered.
func (r *Replicator) admit(c *streamCounters, sender string, boot uint64) bool {
	if sender == r.cfg.ReplicaID {
		// Our own echo, or an earlier incarnation of us: never applied.
		c.echoes.Add(1)
		return false
	}
	r.mu.Lock()
	if !r.isPeerLocked(sender) {
		r.mu.Unlock()
		c.notPeer.Add(1)
		return false
	}
	v, prev := r.members.CheckBoot(sender, boot)
	r.mu.Unlock()
	switch v {
	case BootRetired:
		c.staleBoot.Add(1)
		return false
	case BootRestarted:
		r.notifyRestart(sender, prev, boot)
	}
	return true
}

func (r *Replicator) notifyRestart(id string, prev, boot uint64) {
	r.log.Info("peer restarted", "peer", id, "prev_boot", prev, "boot", boot)
	r.enqueueControl(inbound{restart: &restartNotice{id: id, prev: prev, boot: boot}})
}

func (r *Replicator) decodeError(c *streamCounters, m Msg, err error) {
	c.decodeErrors.Add(1)
	r.log.Debug("dropping undecodable message", "subject", m.Subject, "bytes", len(m.Data),
		"unknown_type", errors.Is(err, ErrUnknownType), "err", err)
}

// enqueueControl queues a control notice in FIFO order with lifecycle
// events, waiting for room if needed (until Close).
func (r *Replicator) enqueueControl(it inbound) {
	select {
	case r.inLC <- it:
	case <-r.done:
	}
}

// dispatch is the dispatcher goroutine: the only caller of callbacks.
func (r *Replicator) dispatch() {
	defer close(r.dispDone)
	for {
		select {
		case <-r.done:
			return
		case it := <-r.inLC:
			r.deliver(it)
		case a := <-r.inAF:
			if f := r.cfg.OnAffinity; f != nil {
				f(a)
			}
		}
	}
}

func (r *Replicator) deliver(it inbound) {
	switch {
	case it.lc != nil:
		if f := r.cfg.OnLifecycle; f != nil {
			f(it.lc)
		}
	case it.ls != nil:
		if f := r.cfg.OnLiveSet; f != nil {
			f(it.ls)
		}
	case it.rr != nil:
		if f := r.cfg.OnResyncRequest; f != nil {
			f(it.rr.Sender)
		}
	case it.restart != nil:
		r.st.restarts.Add(1)
		if f := r.cfg.OnPeerRestart; f != nil {
			f(it.restart.id, it.restart.prev, it.restart.boot)
		}
	case it.change != nil:
		if f := r.cfg.OnMemberChange; f != nil {
			f(*it.change)
		}
	}
}
