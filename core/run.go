package core

import (
	"context"
	"fmt"

	"github.com/kvselect/kvselect/recovery"
)

// Run performs the startup order and then serves until ctx ends, when it shuts down in
// reverse (Close) and returns. The order (the seed's, spec §1.2):
//
//  1. New has joined the bus (WithTransport), so peers mirror this replica's bookings;
//  2. KV-event listeners start and buffer (EnableKVEvents; no-op without use_kv_events);
//  3. with Recovery.Enabled, the index is recovered from a peer and submitted (Recover), while
//     /ready answers 503;
//  4. listeners may apply what they buffered (OpenGate);
//  5. with a transport and Recovery.Enabled, this replica answers peers' snapshot requests
//     (ServeSnapshots);
//  6. the expiry sweep starts (Start), and Started is closed.
//
// ctx ending during recovery ends it (the replica starts empty) and Run shuts down without
// serving. Serve HTTP before calling Run so that liveness answers during a long recovery. Run
// returns nil after a clean shutdown, or the error that stopped startup (after Close).
func (s *Service) Run(ctx context.Context) error {
	s.EnableKVEvents()
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
