package core

import (
	"math"
	"time"

	"github.com/kvselect/kvselect/bus"
)

// Replication of AIBrix session bindings (the table is in aibrix_sessions.go).
//
// On the bus a binding travels as a bus.Affinity target binding: Model and SessionID name the
// session, Target/Port/TTLMillis carry the binding, Sequence/Writer its version, and Group is
// aibrixAffinityGroup. Receivers route affinity messages with a Target here
// (BusReplicator.applyAffinity) and every other affinity message to the engine. Group is set
// to a name no routing group plausibly has so that a replica built before the target trailer,
// which skips the trailer and reads the message as a worker binding of worker 0, finds no such
// partition and drops it instead of pinning a real session to worker 0.

// aibrixAffinityGroup is the Group of every AIBrix target binding on the wire.
const aibrixAffinityGroup = "\x00aibrix"

// AIBrixSessionReplicator is implemented by a [Replicator] that can carry AIBrix session
// bindings ([*BusReplicator] does). A custom replicator implements it to have
// [Service.EnableAIBrixSessions] publish through it, and delivers its peers' bindings with
// [AIBrixSessions.Apply]. PublishAIBrixSession must not block or retain ev.
type AIBrixSessionReplicator interface {
	PublishAIBrixSession(ev *AIBrixSessionEvent)
}

var _ AIBrixSessionReplicator = (*BusReplicator)(nil)

// EnableAIBrixSessions returns an AIBrix session table whose version writer is the service's
// boot id and which, when the service replicates through an [AIBrixSessionReplicator],
// publishes its binds to peers and (for a [*BusReplicator]) receives theirs. Peers' bindings
// are applied at the service's clock, so the AIBrix handler should use the same clock.
//
// Call it on a service built with [WithTransport] (without one the table stays local). Calling it
// again attaches the new table in place of the old one on the bus replicator. Bindings that
// arrive before a table is attached are dropped (replication is best-effort).
func (s *Service) EnableAIBrixSessions(cfg AIBrixSessionConfig) *AIBrixSessions {
	s.mu.Lock()
	repl := s.repl
	s.mu.Unlock()
	var publish func(*AIBrixSessionEvent)
	if ar, ok := repl.(AIBrixSessionReplicator); ok {
		publish = ar.PublishAIBrixSession
	}
	st := NewAIBrixSessions(cfg, s.bootID, publish)
	if br, ok := repl.(*BusReplicator); ok {
		br.aibrix.Store(st)
	}
	return st
}

// AIBrixSessions returns the table attached to the service's bus replicator by
// EnableAIBrixSessions, or nil when there is none (no table, or no bus replication).
func (s *Service) AIBrixSessions() *AIBrixSessions {
	s.mu.Lock()
	br, ok := s.repl.(*BusReplicator)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return br.aibrix.Load()
}

// PublishAIBrixSession implements [AIBrixSessionReplicator]: it queues ev as a target
// binding (never blocking; the bus drops when its queue is full).
func (br *BusReplicator) PublishAIBrixSession(ev *AIBrixSessionEvent) {
	br.r.PublishAffinity(&bus.Affinity{
		Model: ev.Key.Model, Group: aibrixAffinityGroup, SessionID: ev.Key.Session,
		Sequence: ev.Sequence, Writer: ev.Writer,
		Target: ev.Target.Candidate, Port: ev.Target.Port, TTLMillis: ttlMillis(ev.TTL),
	})
}

// applyAIBrixSession merges a peer's target binding into the attached table (on the bus
// dispatcher goroutine; the bus has already dropped echoes and non-peers).
func (br *BusReplicator) applyAIBrixSession(a *bus.Affinity) {
	st := br.aibrix.Load()
	if st == nil {
		return // no AIBrix sessions on this replica
	}
	ev := aibrixEventFromBus(a)
	st.Apply(&ev, br.svc.clock())
}

// aibrixEventFromBus translates a received target binding (the inverse of
// PublishAIBrixSession; Group is not interpreted).
func aibrixEventFromBus(a *bus.Affinity) AIBrixSessionEvent {
	return AIBrixSessionEvent{
		Key:      AIBrixSessionKey{Model: a.Model, Session: a.SessionID},
		Target:   AIBrixTarget{Candidate: a.Target, Port: a.Port},
		TTL:      time.Duration(a.TTLMillis) * time.Millisecond,
		Sequence: a.Sequence, Writer: a.Writer, Sender: a.Sender,
	}
}

// ttlMillis converts a TTL to the wire's milliseconds: 0 stays 0 (removal), a positive TTL
// below 1 ms rounds up to 1 ms (not to a removal), and TTLs beyond the u32 range (~49 days)
// saturate.
func ttlMillis(d time.Duration) uint32 {
	switch {
	case d <= 0:
		return 0
	case d >= time.Duration(math.MaxUint32)*time.Millisecond:
		return math.MaxUint32
	}
	return uint32((d + time.Millisecond - 1) / time.Millisecond)
}
