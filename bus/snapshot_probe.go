package bus

import (
	"context"
	"errors"
	"fmt"
)

// Snapshot probe: "who can give me a snapshot right now?"
//
// A replica recovering at startup used to learn its sources only from heartbeats (one per
// interval), so a late joiner on a loaded machine could give up before it heard a live peer. With
// the probe it asks at once: a request on Subjects.SnapshotProbe is answered by every replica that
// serves snapshots, and NATS hands the requester the first answer. No responders means nobody
// serves snapshots at this moment (alone, or every peer still recovering).
//
// Wire format (version 1), both directions: one version byte (1), then for the reply the
// answering replica's id (1..256 bytes). Decoders accept any version >= 1 and ignore nothing
// else: a later version must keep the id as the whole remainder, or use a new subject.

// probeVersion is the probe wire version this build writes.
const probeVersion = 1

// ErrProbeReply is returned for a probe reply that does not decode.
var ErrProbeReply = errors.New("bus: malformed snapshot probe reply")

// EncodeProbeReply returns the probe reply naming replicaID.
func EncodeProbeReply(replicaID string) []byte {
	return append([]byte{probeVersion}, replicaID...)
}

// DecodeProbeReply returns the replica id a probe reply names.
func DecodeProbeReply(b []byte) (string, error) {
	if len(b) < 2 || b[0] < 1 {
		return "", fmt.Errorf("%w: %d bytes", ErrProbeReply, len(b))
	}
	id := string(b[1:])
	if err := ValidateReplicaID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrProbeReply, err)
	}
	return id, nil
}

// ServeSnapshotProbe answers snapshot probes with this replica's id. Install it together with
// (after) ServeSnapshot: a replica that answers the probe must serve its snapshot subject. The
// subscription is removed by Close.
func (r *Replicator) ServeSnapshotProbe() error {
	reply := EncodeProbeReply(r.cfg.ReplicaID)
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	sub, err := r.tr.Subscribe(r.subjects.SnapshotProbe(), func(m Msg) {
		if m.Reply == "" || len(m.Data) < 1 || m.Data[0] < 1 {
			return // not a probe request
		}
		if err := r.tr.Publish(m.Reply, reply); err != nil {
			r.log.Debug("snapshot probe reply failed", "err", err)
		}
	})
	if err != nil {
		return err
	}
	r.subs = append(r.subs, sub)
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	if err := r.tr.Flush(ctx); err != nil {
		r.log.Debug("flush after snapshot probe subscribe failed", "err", err)
	}
	return nil
}

// ProbeSnapshotSource asks the cluster for a replica that serves snapshots and returns the id of
// the first that answers (never this replica's own). It fails with [ErrNoResponders] at once
// when nobody serves snapshots, and with [ErrTimeout] when ctx ends first.
func (r *Replicator) ProbeSnapshotSource(ctx context.Context) (string, error) {
	b, err := r.tr.Request(ctx, r.subjects.SnapshotProbe(), []byte{probeVersion})
	if err != nil {
		return "", fmt.Errorf("bus: snapshot probe: %w", err)
	}
	id, err := DecodeProbeReply(b)
	if err != nil {
		return "", err
	}
	if id == r.cfg.ReplicaID {
		return "", fmt.Errorf("bus: snapshot probe: %w (only this replica answered)", ErrNoResponders)
	}
	return id, nil
}
