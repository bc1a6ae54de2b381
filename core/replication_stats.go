package core

// BusGuardStats counts what the bus's defences did: messages dropped for their origin, tables
// at their bounds, dead peers released (GET /metrics exports them as kvselect_bus_*).
type BusGuardStats struct {
	// By stream ("lifecycle", "affinity", "members"): envelopes claiming a sender other than
	// their subject's, v1 messages refused (--bus-v1 off), and v1 messages for a replica
	// already heard on its own v2 subject.
	Impersonations  map[string]uint64
	V1Refused       map[string]uint64
	Unauthenticated map[string]uint64
	DecodeErrors    map[string]uint64

	MembersRejected uint64 // heartbeats of new ids refused: members table full
	LogsSuppressed  uint64 // membership log lines dropped by the rate limit
	Dead            DeadPeerStats
	Pending         PendingLiveSetStats
}

// BusGuardStats reports the bus defence counters; ok is false when replication is off.
func (s *Service) BusGuardStats() (st BusGuardStats, ok bool) {
	s.mu.Lock()
	br, isBus := s.repl.(*BusReplicator)
	s.mu.Unlock()
	if !isBus {
		return BusGuardStats{}, false
	}
	bs := br.Stats()
	st = BusGuardStats{
		Impersonations:  map[string]uint64{"lifecycle": bs.Lifecycle.Impersonations, "affinity": bs.Affinity.Impersonations, "members": bs.Heartbeats.Impersonations},
		V1Refused:       map[string]uint64{"lifecycle": bs.Lifecycle.V1Refused, "affinity": bs.Affinity.V1Refused, "members": bs.Heartbeats.V1Refused},
		Unauthenticated: map[string]uint64{"lifecycle": bs.Lifecycle.Unauthenticated, "affinity": bs.Affinity.Unauthenticated, "members": bs.Heartbeats.Unauthenticated},
		DecodeErrors:    map[string]uint64{"lifecycle": bs.Lifecycle.DecodeErrors, "affinity": bs.Affinity.DecodeErrors, "members": bs.Heartbeats.DecodeErrors},
		MembersRejected: bs.MembersRejected,
		LogsSuppressed:  bs.LogsSuppressed + br.logLimit.Suppressed(),
		Dead:            br.DeadPeerStats(),
		Pending:         br.PendingLiveSetStats(),
	}
	return st, true
}
