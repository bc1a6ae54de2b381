package core

import (
	"fmt"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// Replica-sync peer management (POST /replica_sync/register_peer and friends). Peers live in
// the Replicator; these methods validate ids before handing them over.

// ErrReplicaSyncDisabled is returned by peer management when no replicator is configured.
var ErrReplicaSyncDisabled = &engine.Error{Kind: engine.ErrConflict, Msg: "replica sync is disabled"}

// errPeerNotFound is returned when deregistering an unknown peer.
var errPeerNotFound = &engine.Error{Kind: engine.ErrNotFound, Msg: "peer not found"}

// RegisterPeer adds a replica-sync peer; added is false when it was already present.
func (s *Service) RegisterPeer(id string) (added bool, err error) {
	if s.repl == nil {
		return false, ErrReplicaSyncDisabled
	}
	if err := bus.ValidateReplicaID(id); err != nil {
		return false, &engine.Error{Kind: engine.ErrBadRequest, Msg: fmt.Sprintf("invalid peer endpoint %q: %v", id, err)}
	}
	if err := ValidatePeerEndpoint(id); err != nil {
		return false, &engine.Error{Kind: engine.ErrBadRequest, Msg: err.Error()}
	}
	if self, ok := s.repl.(interface{ IsSelf(string) bool }); id == s.cfg.ReplicaID || ok && self.IsSelf(id) {
		return false, &engine.Error{Kind: engine.ErrBadRequest, Msg: fmt.Sprintf("%q is this replica's own id", id)}
	}
	return s.repl.AddPeer(id), nil
}

// DeregisterPeer removes a replica-sync peer (404 when absent).
func (s *Service) DeregisterPeer(id string) error {
	if s.repl == nil {
		return ErrReplicaSyncDisabled
	}
	if err := ValidatePeerEndpoint(id); err != nil {
		return &engine.Error{Kind: engine.ErrBadRequest, Msg: err.Error()}
	}
	if !s.repl.RemovePeer(id) {
		return errPeerNotFound
	}
	return nil
}

// Peers lists the configured replica-sync peers, sorted ([] when disabled).
func (s *Service) Peers() []string {
	if s.repl == nil {
		return []string{}
	}
	return s.repl.Peers()
}
