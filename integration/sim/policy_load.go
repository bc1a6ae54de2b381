package sim

// loadTracker is a router's own account of the load it placed: which worker each request went
// to, how many requests it has in flight per worker (routed and not finished), and how many
// prompt tokens it routed per worker that have not reached their first token. Everything in it
// is observable by a router that sees only its own decisions and the request lifecycle
// (prefill_complete at the first token, free at finish); it never reads the simulator.
//
// Owned by one policy; the zero value is ready. Lifecycle calls for a request it did not route
// are ignored, and each request counts once (a second prefillDone or done is a no-op).
type loadTracker struct {
	worker   []int  // request id → worker, −1 when not routed here
	prompt   []int  // request id → prompt tokens still counted in pending
	finished []bool // request id → done was applied
	inflight []int  // worker → routed, unfinished requests
	pending  []int  // worker → routed prompt tokens before their first token
}

func (t *loadTracker) grow(workers int) {
	for len(t.inflight) < workers {
		t.inflight = append(t.inflight, 0)
		t.pending = append(t.pending, 0)
	}
}

// route records request id (prompt tokens) as sent to worker w.
func (t *loadTracker) route(id, w, tokens int) {
	t.grow(w + 1)
	for len(t.worker) <= id {
		t.worker = append(t.worker, -1)
		t.prompt = append(t.prompt, 0)
		t.finished = append(t.finished, false)
	}
	if t.worker[id] >= 0 {
		return
	}
	t.worker[id], t.prompt[id] = w, tokens
	t.inflight[w]++
	t.pending[w] += tokens
}

// prefillDone records request id's first token.
func (t *loadTracker) prefillDone(id int) {
	if id < 0 || id >= len(t.worker) || t.worker[id] < 0 {
		return
	}
	t.pending[t.worker[id]] -= t.prompt[id]
	t.prompt[id] = 0
}

// done records request id's finish (and its first token, if that was never reported).
func (t *loadTracker) done(id int) {
	if id < 0 || id >= len(t.worker) || t.worker[id] < 0 || t.finished[id] {
		return
	}
	t.prefillDone(id)
	t.finished[id] = true
	t.inflight[t.worker[id]]--
}

// InFlight returns the requests routed to w and not finished.
func (t *loadTracker) InFlight(w int) int {
	if w >= len(t.inflight) {
		return 0
	}
	return t.inflight[w]
}

// PendingPrompt returns the prompt tokens routed to w that have not reached their first token.
func (t *loadTracker) PendingPrompt(w int) int {
	if w >= len(t.pending) {
		return 0
	}
	return t.pending[w]
}

// leastLoaded returns the worker of n with the fewest in-flight requests, then the fewest
// pending prompt tokens, then the lowest index.
func (t *loadTracker) leastLoaded(n int) int {
	best := 0
	for w := 1; w < n; w++ {
		if a, b := t.InFlight(w), t.InFlight(best); a < b || (a == b && t.PendingPrompt(w) < t.PendingPrompt(best)) {
			best = w
		}
	}
	return best
}
