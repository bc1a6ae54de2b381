package bus

import (
	"context"
	"errors"
	"fmt"
)

// Snapshot request/reply seam.
//
// The snapshot protocol itself (chunking, digests, ids) is defined by the
// recovery package (recovery/snapwire.go); this package carries its bytes
// opaquely. What is fixed here: a replica answers snapshot requests on
// Subjects.Snapshot(its own replica id), requests are addressed to one
// chosen peer (never a queue group: the requester wants a specific,
// healthy, warmed-up peer), and bytes in both directions are opaque here.
// Recovery code builds its protocol on these two methods.

// SnapshotHandler answers one snapshot request. It runs on the snapshot
// subscription's goroutine, one request at a time; req is owned by the
// handler. A nil reply with a nil error sends an empty reply; an error
// sends nothing (the requester times out) and is logged.
type SnapshotHandler func(req []byte) (reply []byte, err error)

// ErrSnapshotServing is returned by ServeSnapshot when a handler is
// already installed.
var ErrSnapshotServing = errors.New("bus: snapshot handler already installed")

// snapshotWorkers bounds the snapshot requests handled at once. Requests are
// handled off the subscription's delivery goroutine, so a long first request
// (which encodes the whole index) does not hold up the chunk requests of
// transfers already under way.
const snapshotWorkers = 4

// ServeSnapshot installs h as this replica's snapshot responder. It can be
// installed once; Close removes it and waits for requests being handled. h
// may be called concurrently (up to snapshotWorkers at once).
func (r *Replicator) ServeSnapshot(h SnapshotHandler) error {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	if r.snapshotServing {
		return ErrSnapshotServing
	}
	subject := r.subjects.Snapshot(r.cfg.ReplicaID)
	sem := make(chan struct{}, snapshotWorkers)
	sub, err := r.tr.Subscribe(subject, func(m Msg) {
		if m.Reply == "" {
			return // not a request
		}
		sem <- struct{}{} // with every worker busy, delivery waits here
		r.snapWG.Add(1)
		go func() {
			defer func() { <-sem; r.snapWG.Done() }()
			reply, err := h(m.Data)
			if err != nil {
				r.log.Warn("snapshot handler failed", "err", err)
				return
			}
			if err := r.tr.Publish(m.Reply, reply); err != nil {
				r.log.Warn("snapshot reply failed", "err", err, "bytes", len(reply))
			}
		}()
	})
	if err != nil {
		return err
	}
	r.subs = append(r.subs, sub)
	r.snapshotServing = true
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	if err := r.tr.Flush(ctx); err != nil {
		r.log.Debug("flush after snapshot subscribe failed", "err", err)
	}
	return nil
}

// RequestSnapshot sends req to peer's snapshot subject and returns the
// reply. It fails with [ErrNoResponders] at once when peer does not serve
// snapshots (or is gone), and with [ErrTimeout] when ctx ends first.
func (r *Replicator) RequestSnapshot(ctx context.Context, peer string, req []byte) ([]byte, error) {
	if err := ValidateReplicaID(peer); err != nil {
		return nil, err
	}
	reply, err := r.tr.Request(ctx, r.subjects.Snapshot(peer), req)
	if err != nil {
		return nil, fmt.Errorf("bus: snapshot from %s: %w", peer, err)
	}
	return reply, nil
}
