package core

import "runtime"

// drainApprox performs the engine's deferred approximate indexing (engine/approx_steps.go) in
// steps of one approxChunk-sized lock hold each, so that a huge booking's blocks enter the
// approximate index without holding the lock for the whole prompt: selections interleave
// between steps. One goroutine drains at a time; a booking that finds a drainer running leaves
// the work to it (the drainer re-checks before it stops). Called without s.mu held.
func (s *Service) drainApprox() {
	for {
		if !s.approxDraining.CompareAndSwap(false, true) {
			return
		}
		for {
			s.mu.Lock()
			more := s.eng.ApproxWork(approxStep)
			s.mu.Unlock()
			if !more {
				break
			}
			runtime.Gosched() // let waiting selections take the lock before the next step
		}
		s.approxDraining.Store(false)
		s.mu.Lock()
		more := s.eng.ApproxWork(0)
		s.mu.Unlock()
		if !more {
			return
		}
	}
}

// approxStep is the work per lock hold (blocks recorded or pruned): a few ms at most.
const approxStep = 1024
