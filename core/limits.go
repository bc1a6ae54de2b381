package core

import "github.com/kvselect/kvselect/core/engine"

// LimitStats is a snapshot of the bounded tables and of what their limits refused or evicted
// (README "Limits"; served as kvselect_limit_* metrics).
type LimitStats struct {
	engine.LimitStats
	// TooLargeBeforeLock counts requests refused by the per-request limits before the lock.
	TooLargeBeforeLock uint64
	// ListenersRefused counts KV-event listeners refused (shared endpoint or listener cap).
	ListenersRefused uint64
	// Listeners is the number of running KV-event listeners.
	Listeners int
}

// LimitStats returns the bounded tables' sizes, limits and counters.
func (s *Service) LimitStats() LimitStats {
	s.mu.Lock()
	st := LimitStats{LimitStats: s.eng.LimitStats()}
	kv := s.kv
	s.mu.Unlock()
	st.TooLargeBeforeLock = s.tooLarge.Load()
	if kv != nil {
		kv.mu.Lock()
		st.ListenersRefused = kv.book.refused
		st.Listeners = len(kv.book.byEndpoint)
		kv.mu.Unlock()
	}
	return st
}
