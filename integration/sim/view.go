package sim

// View is what a policy may consult: what a deployment's router knows. That is its own
// routing count, the fields each worker registers, and the workers' scraped metrics
// (view_observed.go); KV events reach a policy that is an EventSink, Config.KVEventDelayMS
// late, and a cache-aware policy keeps its own index of them (kvEventIndex). The View never
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

// Worker returns what worker w registered (its preset's batch limits and its KV capacity).
func (v *View) Worker(w int) WorkerInfo { return v.sim.infos[w] }

// InFlight returns how many requests the router sent to w that have not finished.
func (v *View) InFlight(w int) int { return v.sim.workers[w].inflight }
