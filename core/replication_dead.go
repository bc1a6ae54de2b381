package core

import (
	"log/slog"

	"github.com/kvselect/kvselect/bus"
)

// Dead peers.
//
// A peer whose heartbeats stop for the dead-peer interval (ReplicationConfig.DeadAfter, default
// bus.DefaultMissedBeats heartbeat periods) expires from the members table; a peer that shuts
// down sends a leave. Either way its bookings mirrored here are released at once: they would
// otherwise count as load until the 300 s expiry guard, steering selections away from ranks
// that may be idle. A silent network black hole between two replicas looks the same from both
// sides and is handled by the same rule.
//
// Re-admission: when a released peer's heartbeats return with the same boot id (a partition
// healed, NATS came back), it joins again; this replica then asks it to republish its live
// bookings (a ResyncRequest), and, as for every join, republishes its own to it. When it
// returns with a new boot id, it restarted: its old bookings are gone anyway and it has none
// to republish.
//
// Bounds: released holds at most maxReleasedPeers ids (cleared when full: a forgotten id that
// returns merely waits for its next live-set announcement to be repaired).

// maxReleasedPeers bounds the ids remembered as released.
const maxReleasedPeers = 4096

// deadPeerStats counts releases (guarded by Service.mu).
type deadPeerStats struct {
	released uint64 // peers whose bookings were released (expired or left)
	bookings uint64 // mirrored bookings released with them
	readmits uint64 // released peers that returned and were asked to republish
}

// releasePeer frees the bookings mirrored from a peer that expired or left, and forgets its
// partial live sets. Bus dispatcher goroutine.
func (br *BusReplicator) releasePeer(c bus.MemberChange) {
	id := c.Member.ID
	s := br.svc
	s.mu.Lock()
	br.dropPendingSets(id)
	n := s.eng.DropPeer(id)
	if len(br.released) >= maxReleasedPeers {
		clear(br.released)
	}
	br.released[id] = c.Member.BootID
	br.dead.released++
	br.dead.bookings += uint64(n)
	if n > 0 {
		s.drainLocked()
	}
	s.mu.Unlock()
	br.logLimit.Log(br.log, slog.LevelInfo, "peer gone; released its mirrored bookings", "peer", id, "change", c.Kind.String(), "bookings", n)
}

// readmitPeer asks a returning peer whose bookings were released to republish them. It
// reports whether the peer had been released.
func (br *BusReplicator) readmitPeer(c bus.MemberChange) bool {
	s := br.svc
	s.mu.Lock()
	_, was := br.released[c.Member.ID]
	delete(br.released, c.Member.ID)
	if was {
		br.dead.readmits++
	}
	s.mu.Unlock()
	if was && c.Kind == bus.MemberJoined {
		br.logLimit.Log(br.log, slog.LevelInfo, "released peer is back; asking it to republish", "peer", c.Member.ID)
		br.r.PublishResyncRequest(c.Member.ID)
	}
	return was
}

// DeadPeerStats are the dead-peer counters.
type DeadPeerStats struct {
	Released uint64 // peers released (expired or left)
	Bookings uint64 // mirrored bookings released with them
	Readmits uint64 // released peers that came back
}

// DeadPeerStats reports the dead-peer counters.
func (br *BusReplicator) DeadPeerStats() DeadPeerStats {
	br.svc.mu.Lock()
	defer br.svc.mu.Unlock()
	return DeadPeerStats{Released: br.dead.released, Bookings: br.dead.bookings, Readmits: br.dead.readmits}
}
