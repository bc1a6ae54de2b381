package sim

// maxOverlap is pure prefix affinity: route to the worker whose KV events show the longest
// cached prefix of the prompt. It is llm-d's sample scheduler configuration with the precise
// prefix-cache scorer alone (llm-d/llm-d-inference-scheduler deploy/config/epp-config.yaml) and
// Dynamo's KV router with the load term weighted to zero. Ties go to the worker with the fewest
// of this router's in-flight requests, then the lowest index. It has no balance guard, which is
// its known failure on traces with a universal first block.
//
// It sees only the KV event stream (kvEventIndex) and its own routing; pass it to Run as the
// EventSink.
type maxOverlap struct {
	kvEventIndex
	load loadTracker
}

// NewMaxOverlap picks the worker with the longest cached prefix by KV events (ties: least
// loaded).
func NewMaxOverlap() Policy { return &maxOverlap{} }

func (p *maxOverlap) Name() string { return "max-overlap" }
func (p *maxOverlap) Pick(v *View, id int, r *Request) int {
	best, bestK := -1, -1
	for w := range v.Workers() {
		k := p.Prefix(w, r.Blocks)
		if k > bestK || (k == bestK && p.load.InFlight(w) < p.load.InFlight(best)) {
			best, bestK = w, k
		}
	}
	p.load.route(id, best, r.Input)
	return best
}
func (p *maxOverlap) PrefillDone(id int) { p.load.prefillDone(id) }
func (p *maxOverlap) Done(id int)        { p.load.done(id) }
