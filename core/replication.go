package core

import (
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// BusReplicator connects a Service to its peers over NATS: local admissions, prefill
// completions and frees are published as versioned lifecycle envelopes, and peers' events are
// mirrored into the engine. It translates between engine events and bus envelopes; the bus
// package knows nothing of the engine.
type BusReplicator struct {
	r   *bus.Replicator
	svc *Service
	log *slog.Logger
}

// ReplicationConfig names this replica and its peers on the bus.
type ReplicationConfig struct {
	Cluster       string   // subject namespace shared by the replicas
	ReplicaID     string   // this replica's id
	HTTPAddr      string   // announced in heartbeats
	Peers         []string // initial replica-sync peers
	DiscoverPeers bool     // treat every live member as a peer
}

// EnableReplication wires svc to the bus over nc. Call it before Start and before serving.
func (s *Service) EnableReplication(cfg ReplicationConfig, nc *nats.Conn) (*BusReplicator, error) {
	br := &BusReplicator{svc: s, log: s.log.With("component", "replication")}
	r, err := bus.New(bus.Config{
		Cluster: cfg.Cluster, ReplicaID: cfg.ReplicaID, HTTPAddr: cfg.HTTPAddr,
		Peers: cfg.Peers, DiscoverPeers: cfg.DiscoverPeers,
		BootID:        s.bootID,
		OnLifecycle:   br.apply,
		OnAffinity:    br.applyAffinity,
		OnPeerRestart: br.peerRestarted,
	}, nc, s.log)
	if err != nil {
		return nil, err
	}
	br.r = r
	s.repl = br
	return br, nil
}

// Publish implements Replicator: it never blocks (the bus queues and drops when full).
func (br *BusReplicator) Publish(ev *engine.ReplicaEvent) {
	lc := &bus.Lifecycle{
		Model: ev.Partition.Model, Group: ev.Partition.Group, BlockSize: ev.BlockSize,
		RequestID: ev.RequestID, Worker: ev.Owner.Worker, Rank: ev.Owner.Rank,
	}
	switch ev.Kind {
	case engine.LifecycleAdd:
		lc.Kind = bus.LifecycleAdd
		a := ev.Add
		lc.Add = &bus.AddData{
			TokenSequence: a.TokenSequence, TrackPrefill: a.TrackPrefill, PrefillTokens: a.PrefillTokens,
			LoraName: a.LoraName, ISL: a.ISL,
		}
		if a.ExpectedOutputTokens != nil {
			lc.Add.ExpectedOutputTokens, lc.Add.HasExpectedOutput = *a.ExpectedOutputTokens, true
		}
	case engine.LifecyclePrefillComplete:
		lc.Kind = bus.LifecyclePrefillComplete
	case engine.LifecycleFree:
		lc.Kind = bus.LifecycleFree
	default:
		return
	}
	br.r.PublishLifecycle(lc)
}

// PublishAffinity implements Replicator.
func (br *BusReplicator) PublishAffinity(ev *engine.AffinityEvent) {
	br.r.PublishAffinity(&bus.Affinity{
		Model: ev.Partition.Model, Group: ev.Partition.Group, SessionID: ev.SessionID,
		Worker: ev.Owner.Worker, Rank: ev.Owner.Rank, HasRank: true, Sequence: ev.Sequence, Writer: ev.Writer,
	})
}

// applyAffinity merges a peer's session binding.
func (br *BusReplicator) applyAffinity(a *bus.Affinity) {
	br.svc.ApplyAffinity(&engine.AffinityEvent{
		Partition: engine.PartitionKey{Model: a.Model, Group: a.Group}, SessionID: a.SessionID,
		Owner: engine.Owner{Worker: a.Worker, Rank: a.Rank}, Sequence: a.Sequence, Writer: a.Writer, Sender: a.Sender,
	})
}

// apply mirrors a peer's event (on the bus dispatcher goroutine).
func (br *BusReplicator) apply(lc *bus.Lifecycle) {
	ev := engine.ReplicaEvent{
		Partition: engine.PartitionKey{Model: lc.Model, Group: lc.Group}, BlockSize: lc.BlockSize,
		RequestID: lc.RequestID, Owner: engine.Owner{Worker: lc.Worker, Rank: lc.Rank}, Sender: lc.Sender,
	}
	switch lc.Kind {
	case bus.LifecycleAdd:
		if lc.Add == nil {
			return
		}
		ev.Kind = engine.LifecycleAdd
		ev.Add = &engine.ReplicaAdd{
			TokenSequence: lc.Add.TokenSequence, TrackPrefill: lc.Add.TrackPrefill,
			PrefillTokens: lc.Add.PrefillTokens, LoraName: lc.Add.LoraName, ISL: lc.Add.ISL,
		}
		if lc.Add.HasExpectedOutput {
			v := lc.Add.ExpectedOutputTokens
			ev.Add.ExpectedOutputTokens = &v
		}
	case bus.LifecyclePrefillComplete:
		ev.Kind = engine.LifecyclePrefillComplete
	case bus.LifecycleFree:
		ev.Kind = engine.LifecycleFree
	default:
		return
	}
	if !br.svc.ApplyReplica(&ev) {
		br.log.Debug("dropped peer lifecycle event", "sender", lc.Sender, "kind", lc.Kind.String(), "request_id", lc.RequestID)
	}
}

// peerRestarted frees the bookings a restarted peer made before it restarted.
func (br *BusReplicator) peerRestarted(id string, prev, boot uint64) {
	br.svc.mu.Lock()
	n := br.svc.eng.DropPeer(id)
	br.svc.mu.Unlock()
	br.log.Info("peer restarted; dropped its mirrored bookings", "peer", id, "bookings", n)
}

// AddPeer implements Replicator.
func (br *BusReplicator) AddPeer(id string) bool { return br.r.AddPeer(id) }

// RemovePeer implements Replicator.
func (br *BusReplicator) RemovePeer(id string) bool { return br.r.RemovePeer(id) }

// Peers implements Replicator.
func (br *BusReplicator) Peers() []string { return br.r.Peers() }

// Members lists the replicas seen on the bus.
func (br *BusReplicator) Members() []bus.Member { return br.r.Members() }

// Stats returns the bus counters (published, received, dropped, decode errors).
func (br *BusReplicator) Stats() bus.Stats { return br.r.Stats() }

// Close stops replication (publishing the leave message).
func (br *BusReplicator) Close() error { return br.r.Close() }

// MemberInfo is one replica seen on the bus (GET /replica_sync/members).
type MemberInfo struct {
	ReplicaID string    `json:"replica_id"`
	BootID    uint64    `json:"boot_id"`
	HTTPAddr  string    `json:"http_addr,omitempty"`
	StartedAt time.Time `json:"started_at"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Peer      bool      `json:"peer"`
}

// Members lists the live replicas seen on the bus, sorted by id ([] when replication is off).
func (s *Service) Members() []MemberInfo {
	br, ok := s.repl.(*BusReplicator)
	if !ok {
		return []MemberInfo{}
	}
	peers := map[string]bool{}
	for _, p := range br.Peers() {
		peers[p] = true
	}
	out := []MemberInfo{}
	for _, m := range br.Members() {
		out = append(out, MemberInfo{
			ReplicaID: m.ID, BootID: m.BootID, HTTPAddr: m.HTTPAddr, StartedAt: time.Unix(0, m.StartedAt).UTC(),
			FirstSeen: m.FirstSeen.UTC(), LastSeen: m.LastSeen.UTC(), Peer: peers[m.ID],
		})
	}
	slices.SortFunc(out, func(a, b MemberInfo) int { return strings.Compare(a.ReplicaID, b.ReplicaID) })
	return out
}
