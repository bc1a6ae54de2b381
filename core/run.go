package core

import (
	"context"
	"fmt"

	"github.com/kvselect/kvselect/recovery"
)

// Run performs the startup order, serves until ctx ends, then shuts down in reverse (Close). The
// order (the seed's, spec §1.2), after New joined the bus: KV-event listeners start and buffer
// (EnableKVEvents); with Recovery.Enabled the index is recovered and submitted (Recover) while
// /ready answers 503; listeners apply what they buffered (OpenGate); a replicating,
// recovering replica answers peers' snapshot requests (ServeSnapshots); the sweep starts
// (Start) and Started is closed. ctx ending during recovery ends it and Run shuts down at once.
// Serve HTTP before Run so that liveness answers during a long recovery. Run returns nil after
// a clean shutdown, or the error that stopped startup (after Close).
func (s *Service) Run(ctx context.Context) error {
	// Under catMu: HTTP catalog changes and the workers file may already be running, and each
	// change's listener reconciliation must not interleave with this first one.
	s.catMu.Lock()
	s.EnableKVEvents()
	s.catMu.Unlock()
	if rc := s.cfg.Recovery; rc.Enabled {
		s.Recover(ctx, rc)
	}
	if ctx.Err() != nil {
		return s.Close()
	}
	s.OpenGate()
	if s.Replication() != nil && s.cfg.Recovery.Enabled {
		if err := s.ServeSnapshots(recovery.ServerOptions{}); err != nil {
			_ = s.Close()
			return fmt.Errorf("snapshot serving: %w", err)
		}
	}
	s.Start()
	close(s.started)
	<-ctx.Done()
	return s.Close()
}

// Started is closed once Run has finished the startup order (never, if ctx ended first).
func (s *Service) Started() <-chan struct{} { return s.started }
