package load

// Learning the partition's queue discipline from the lifecycle the tracker already sees.
//
// What a miss's uncached prefill costs the other requests of its rank depends on the order in
// which the rank's engine admits waiting work, and no worker registers that. An engine that
// admits in arrival order (vLLM's default policy, SGLang's "fcfs", the default of its releases
// since 2025, the legacy FIFO) delays every request that arrives while the miss waits and runs;
// one that orders its waiting queue by cached prefix (SGLang's "lpm") lets later hits overtake
// the miss, which then waits for them instead. The router sees the difference in the order of
// first tokens: on an arrival-order engine a booking reaches its first token no later than the
// younger bookings of its rank (up to the requests one engine step finishes together), on a
// reordering one younger hits regularly come first.
//
// The tracker keeps, per owner, the admission time of its latest booking and the youngest booking
// whose prefill completed (with the completion's time). A timed first completion of a booking
// (PrefillCompleteAt) with a younger booking on its owner is one sample: overtaken when that
// youngest completed booking is younger than it and completed more than OvertakeSlack before it.
// A completion with no younger booking on its rank says nothing about the order and is not a
// sample. The partition's share of overtaken samples is a running mean over the first
// reorderWindow samples, then an exponential average over about as many. Peers' bookings and
// completions, mirrored into the tracker, count like local ones (their times are the replicated
// events' arrival, a few milliseconds late: far below the slack).
//
// Measured in simulation (integration/sim TestReorderingEngineLearnedAndPriced: 8 workers, four
// long prompts, one too hot for one worker, overload): the SGLang-style engine in LPM order
// teaches 0.43–0.72 over 2,400–2,650 samples at 1.8–2.2× the trace's rate; the vLLM-style
// engine and the SGLang-style one in FCFS order exactly 0 over ~2,800 (464 preemptions on the
// vLLM-style one).

// OvertakeSlack is how much earlier, in nanoseconds, a younger booking's first token must come
// than an older one's on the same owner to count as overtaking it: above the spread of one
// engine step's first tokens as a caller reports them (separate streams, milliseconds to tens of
// milliseconds apart), below the waits a reordering engine imposes on the misses it holds back
// (seconds). Over the first-token order of every request of a simulated run, the share of
// requests a younger one on their rank beat by more than the slack: the LPM engine's 40.1 % at
// 20 ms, 39.9 % at 250 ms, 38.2 % at 1 s (34 % on agent sessions); the arrival-order engines'
// 11–17 % at no slack (one step's completions) and 0 from 20 ms.
const OvertakeSlack = 250e6

// ReorderedShare is the share of overtaken samples from which the partition's engines count as
// reordering (Reordered): between the arrival-order engines' 0 and the reordering ones' 0.3–0.4.
const ReorderedShare = 0.1

// reorderWindow is the number of samples the running mean covers before it forgets
// exponentially; reorderMinSamples is how many Reordered needs before it answers true.
const (
	reorderWindow     = 256
	reorderMinSamples = 32
)

// orderState is the per-owner part of ownerState that observes first-token order.
type orderState struct {
	// lastAdmitted is the latest AdmittedAt of a booking added on the owner (added: any).
	lastAdmitted int64
	// youngAdmitted is the AdmittedAt of the youngest booking whose timed prefill completed,
	// youngDone that completion's time (done: one has).
	youngAdmitted, youngDone int64
	added, done              bool
}

// admitted notes a booking added at time at.
func (o *orderState) admitted(at int64) {
	if !o.added || at > o.lastAdmitted {
		o.lastAdmitted, o.added = at, true
	}
}

// complete takes the timed first completion at now of a booking admitted at: sample reports
// whether it is a sample, overtaken whether a younger booking reached its first token more
// than OvertakeSlack earlier.
func (o *orderState) complete(at, now int64) (overtaken, sample bool) {
	sample = o.added && o.lastAdmitted > at
	overtaken = sample && o.done && o.youngAdmitted > at && now-o.youngDone > OvertakeSlack
	if !o.done || at > o.youngAdmitted {
		o.youngAdmitted, o.youngDone, o.done = at, now, true
	}
	return overtaken, sample
}

// reorderEstimator is the partition's share of overtaken samples.
type reorderEstimator struct {
	share   float64
	samples uint64
}

func (e *reorderEstimator) observe(overtaken bool) {
	x := 0.0
	if overtaken {
		x = 1
	}
	e.samples++
	e.share += (x - e.share) / float64(min(e.samples, reorderWindow))
}

// ReorderShare returns the partition's learned share of first completions that a younger booking
// of the same owner overtook, and the samples it rests on (see the top of this file).
func (t *Tracker) ReorderShare() (share float64, samples uint64) {
	return t.reorder.share, t.reorder.samples
}

// Reordered reports whether the partition's engines reorder their waiting queues: at least
// reorderMinSamples samples, ReorderedShare of them overtaken.
func (t *Tracker) Reordered() bool {
	return t.reorder.samples >= reorderMinSamples && t.reorder.share >= ReorderedShare
}
