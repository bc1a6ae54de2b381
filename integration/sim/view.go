package sim

// View is what a policy may consult: what a deployment's router knows. That is its own
// bookkeeping (what it routed where, what has not reached its first token), the fields each
// worker registers, and the KV events delivered so far (Config.KVEventDelayMS late). It never
// exposes the simulated engines' true caches, queues or timing.
type View struct {
	sim *simulation
}

// WorkerInfo is what a worker registers with a router (Dynamo's and kvselect's worker record).
type WorkerInfo struct {
	BlockSize           int // tokens per block
	TotalKVBlocks       int
	MaxNumBatchedTokens int
	MaxNumSeqs          int
}

// Workers returns the number of workers.
func (v *View) Workers() int { return len(v.sim.workers) }

// Now returns the simulation clock in milliseconds.
func (v *View) Now() float64 { return v.sim.now }

// Worker returns what worker w registered (every simulated worker registers the same).
func (v *View) Worker(int) WorkerInfo { return v.sim.info }

// InFlight returns how many requests the router sent to w that have not finished.
func (v *View) InFlight(w int) int { return v.sim.workers[w].inflight }

// PendingPrefillTokens returns the prompt tokens the router sent to w that have not reached
// their first token, less the prefix the delivered KV events showed cached on w when each was
// routed: the router's own estimate of w's outstanding prefill work.
func (v *View) PendingPrefillTokens(w int) int { return v.sim.workers[w].pendingTokens }

// CachedPrefix returns how many leading blocks of r are cached on w according to the KV events
// delivered so far (an event is Config.KVEventDelayMS late; a block evicted since is still
// reported until its Removed event arrives).
func (v *View) CachedPrefix(w int, r *Request) int {
	obs := v.sim.workers[w].observed
	for i, b := range r.Blocks {
		if _, ok := obs[b]; !ok {
			return i
		}
	}
	return len(r.Blocks)
}
