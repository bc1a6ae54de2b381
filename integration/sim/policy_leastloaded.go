package sim

// leastLoaded is least-outstanding-requests load balancing: Envoy's LEAST_REQUEST and nginx's
// least_conn applied to inference, and the shortest-queue rule SGLang's cache-aware router falls
// back to. It counts its own in-flight requests (routed, not finished) per worker — the load a
// router knows without asking anyone — and breaks ties by the prompt tokens it routed that have
// not reached their first token, then by the lowest index. It is cache-blind.
type leastLoaded struct{ load loadTracker }

// NewLeastLoaded picks the worker with the fewest requests this router has in flight on it.
func NewLeastLoaded() Policy { return &leastLoaded{} }

func (p *leastLoaded) Name() string { return "least-loaded" }
func (p *leastLoaded) Pick(v *View, id int, r *Request) int {
	w := p.load.leastLoaded(v.Workers())
	p.load.route(id, w, r.Input)
	return w
}
func (p *leastLoaded) PrefillDone(id int) { p.load.prefillDone(id) }
func (p *leastLoaded) Done(id int)        { p.load.done(id) }
