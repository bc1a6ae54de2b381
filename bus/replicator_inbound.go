package bus

import (
	"errors"
	"fmt"
	"log/slog"
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

// lifecycleHandler returns the handler of a lifecycle subscription (v2 wildcard, or the v1
// subject when v1 is set), which carries lifecycle events, live sets and resync requests.
func (r *Replicator) lifecycleHandler(v1 bool) Handler {
	dec := NewDecoder()
	c := &r.st.lifecycle
	o := r.newOriginCheck(kindLifecycle, v1, c)
	return func(m Msg) {
		if o.refuseV1() {
			return
		}
		msg, err := dec.Decode(m.Data)
		var it inbound
		switch v := msg.(type) {
		case *Lifecycle:
			it.lc = v
		case *LiveSet:
			it.ls = v
		case *ResyncRequest:
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
		auth, ok := o.check(m.Subject, sender)
		if !ok {
			return
		}
		if it.rr != nil && it.rr.Target != r.cfg.ReplicaID {
			return // addressed to another replica
		}
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		if !r.admit(c, sender, boot, auth) {
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

// affinityHandler returns the handler of an affinity subscription.
func (r *Replicator) affinityHandler(v1 bool) Handler {
	dec := NewDecoder()
	c := &r.st.affinity
	o := r.newOriginCheck(kindAffinity, v1, c)
	return func(m Msg) {
		if o.refuseV1() {
			return
		}
		a := &Affinity{}
		if err := dec.DecodeInto(m.Data, a); err != nil {
			r.decodeError(c, m, err)
			return
		}
		auth, ok := o.check(m.Subject, a.Sender)
		if !ok {
			return
		}
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		if !r.admit(c, a.Sender, a.BootID, auth) {
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

// membersHandler returns the handler of a members subscription. Every
// replica's heartbeats are observed (membership is cluster-wide). A restart
// notice is raised for every replica seen with a new boot id, peer or not: in
// discovery mode a peer that left or expired is no longer a peer when it
// comes back, yet its earlier events were applied, and for a replica whose
// events were never applied the notice drops nothing. A boot change is
// believed only from an authenticated heartbeat once the id has been heard on
// its own v2 subject (Members.ObserveFrom).
func (r *Replicator) membersHandler(v1 bool) Handler {
	dec := NewDecoder()
	c := &r.st.heartbeats
	o := r.newOriginCheck(kindMembers, v1, c)
	var hb Heartbeat
	return func(m Msg) {
		if o.refuseV1() {
			return
		}
		if err := dec.DecodeInto(m.Data, &hb); err != nil {
			r.decodeError(c, m, err)
			return
		}
		auth, ok := o.check(m.Subject, hb.Sender)
		if !ok {
			return
		}
		if hb.Sender == r.cfg.ReplicaID {
			c.echoes.Add(1)
			return
		}
		r.orderMu.Lock()
		defer r.orderMu.Unlock()
		r.mu.Lock()
		obs := r.members.ObserveFrom(&hb, time.Now(), auth)
		r.mu.Unlock()
		switch {
		case obs.Rejected:
			r.logLimit.Log(r.log, slog.LevelWarn, "members table full; heartbeat of a new replica dropped", "member", hb.Sender)
			return
		case obs.Verdict == BootRetired:
			c.staleBoot.Add(1)
			return
		case obs.Verdict == BootUnauthenticated:
			c.unauthenticated.Add(1)
			return
		}
		c.received.Add(1)
		if obs.Verdict == BootRestarted {
			r.notifyRestart(hb.Sender, obs.PrevBootID, hb.BootID)
		}
		if obs.Change.Kind != ChangeNone {
			ch := obs.Change
			r.logLimit.Log(r.log, slog.LevelInfo, "membership change", "member", ch.Member.ID, "change", ch.Kind, "boot", ch.Member.BootID)
			r.enqueueControl(inbound{change: &ch})
		}
	}
}

// originCheck authenticates the sender of one subscription's messages: on a v2 subscription
// the envelope's sender must be the one the subject names (the NATS server, with kvselect's
// permissions, lets only that replica publish there); on a v1 subscription nothing is
// authenticated and messages pass only with LegacyV1. Owned by one subscription goroutine.
type originCheck struct {
	r         *Replicator
	kind      string
	v1        bool
	c         *streamCounters
	lastID    string // cache: the token of the last sender seen
	lastToken string
}

func (r *Replicator) newOriginCheck(kind string, v1 bool, c *streamCounters) *originCheck {
	return &originCheck{r: r, kind: kind, v1: v1, c: c}
}

// refuseV1 drops (and counts) a v1 message when LegacyV1 is off, before it is decoded.
func (o *originCheck) refuseV1() bool {
	if o.v1 && !o.r.cfg.LegacyV1 {
		o.c.v1Refused.Add(1)
		return true
	}
	return false
}

// check reports whether a message claiming sender may be processed, and whether its origin is
// authenticated.
func (o *originCheck) check(subject, sender string) (authenticated, ok bool) {
	if o.v1 {
		return false, true
	}
	tok, ok := o.r.subjects.SenderFromSubject(subject, o.kind)
	if ok {
		if sender != o.lastID {
			o.lastID, o.lastToken = sender, EncodeSenderToken(sender)
		}
		ok = tok == o.lastToken
	}
	if !ok {
		o.c.impersonations.Add(1)
		o.r.logLimit.Log(o.r.log, slog.LevelWarn, "dropping a message whose sender is not its subject's (impersonation)",
			"subject", subject, "claimed_sender", sender)
		return false, false
	}
	return true, true
}

// admit applies the sender filters shared by lifecycle and affinity events
// and raises a restart notice (ahead of the event) when a peer's boot id
// changed. It reports whether the event should be delivered.
func (r *Replicator) admit(c *streamCounters, sender string, boot uint64, authenticated bool) bool {
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
	v, prev := r.members.CheckBootFrom(sender, boot, authenticated)
	r.mu.Unlock()
	switch v {
	case BootRetired:
		c.staleBoot.Add(1)
		return false
	case BootUnauthenticated:
		c.unauthenticated.Add(1)
		return false
	case BootRestarted:
		r.notifyRestart(sender, prev, boot)
	}
	return true
}

func (r *Replicator) notifyRestart(id string, prev, boot uint64) {
	r.logLimit.Log(r.log, slog.LevelInfo, "peer restarted", "peer", id, "prev_boot", prev, "boot", boot)
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
