package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/kvselect/kvselect/integration/fleet"
)

// DefaultKVEventDelayMS is the KV-event delivery delay kvselect-sim uses unless told otherwise:
// a few milliseconds, what ZMQ publication, a router's subscriber and its index update add up
// to on one cluster network.
const DefaultKVEventDelayMS = 5

// DefaultScrapeIntervalMS is the metrics scrape period kvselect-sim uses unless told
// otherwise: the Gateway API inference extension's endpoint picker (llm-d's EPP) refreshes
// each model server's /metrics every 50 ms by default (DefaultRefreshMetricsInterval,
// --refresh-metrics-interval), so a metrics-reading router decides on gauges up to 50 ms old.
const DefaultScrapeIntervalMS = 50

// Config describes one simulation run.
type Config struct {
	Workers int // number of workers (≥ 1)
	// CapacityBlocks is each worker's KV cache in 512-token blocks (0: the model preset's).
	CapacityBlocks int
	Speedup        float64 // arrival-time compression (2 = twice the trace's rate); default 1
	Seed           uint64  // random seed for policies
	// Model is the engine preset (fleet.AllPresetNames; "" is fleet.DefaultPreset).
	Model string
	// KVEventDelayMS delays every KV event between the worker that emits it and the policy
	// (and the selection engine) that learns it; 0 delivers at once.
	KVEventDelayMS float64
	// ScrapeIntervalMS is how often the router scrapes each worker's metrics (running and
	// waiting requests, KV usage; see scraped): a policy reads the last scrape. 0 reads the
	// engines' current values.
	ScrapeIntervalMS float64
}

// workerFleet is what a run's workers are: each one's engine spec and KV capacity in blocks.
// Model names one preset or a mix (fleet.Mix: worker i runs the (i mod k)-th preset); each
// worker holds CapacityBlocks, or its own preset's capacity when that is 0.
type workerFleet struct {
	name       string
	specs      []fleet.Spec // per worker
	capacities []int        // per worker
}

// fleet resolves the configuration's workers.
func (c Config) fleet() (workerFleet, error) {
	mix, err := fleet.Mix(c.Model)
	if err != nil {
		return workerFleet{}, err
	}
	f := workerFleet{name: mix[0].Name}
	if len(mix) > 1 {
		f.name = c.Model
	}
	for w := range max(c.Workers, 0) {
		sp := mix[w%len(mix)]
		capacity := c.CapacityBlocks
		if capacity == 0 {
			capacity = sp.NumBlocks(TraceBlockTokens)
		}
		f.specs = append(f.specs, sp)
		f.capacities = append(f.capacities, capacity)
	}
	return f, nil
}

// totalBlocks is the fleet's KV capacity.
func (f workerFleet) totalBlocks() int {
	n := 0
	for _, c := range f.capacities {
		n += c
	}
	return n
}

// infos is what the fleet's workers register, in worker order: the trace's block size, their
// capacity and their preset's batch limits.
func (f workerFleet) infos() []WorkerInfo {
	infos := make([]WorkerInfo, len(f.specs))
	for w := range infos {
		infos[w] = workerInfoOf(f.specs[w], f.capacities[w])
	}
	return infos
}

// workerInfos is what the workers of a run with configuration c register (workerFleet.infos).
func (c Config) workerInfos() ([]WorkerInfo, error) {
	f, err := c.fleet()
	return f.infos(), err
}

func workerInfoOf(sp fleet.Spec, capacity int) WorkerInfo {
	return WorkerInfo{BlockSize: TraceBlockTokens, TotalKVBlocks: capacity, MaxNumBatchedTokens: sp.MaxNumBatchedTokens, MaxNumSeqs: sp.MaxNumSeqs}
}

// Result is one policy's outcome on a trace.
type Result struct {
	Policy   string  `json:"policy"`
	Model    string  `json:"model"`
	Requests int     `json:"requests"`
	HitRate  float64 `json:"hit_rate"`
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	TTFTP999 float64 `json:"ttft_p999_ms"`
	TTFTMax  float64 `json:"ttft_max_ms"`
	TTFTMean float64 `json:"ttft_mean_ms"`
	LoadCV   float64 `json:"load_cv"`
	Queued   int     `json:"queued"`
	Rejected int     `json:"rejected"`
	// Preemptions counts requests the engines preempted to free KV blocks (each time).
	Preemptions int     `json:"preemptions"`
	IdealHit    float64 `json:"ideal_hit_rate"`
	// IdealHitAtCapacity is IdealHitRateAt(the fleet's blocks): the reuse of one LRU cache as
	// large as the whole fleet's, the ceiling the routing-quality targets are stated against.
	IdealHitAtCapacity float64 `json:"ideal_hit_rate_at_capacity"`
	// FleetBlocks is the fleet's KV capacity: every worker's blocks.
	FleetBlocks int     `json:"fleet_blocks"`
	MakespanS   float64 `json:"makespan_s"`

	// AvailHit is the token hit rate the run would have had if every request had used the
	// longest prefix cached on any worker when it was first scheduled: the ceiling routing
	// could reach given the caches this run produced. AvailHit − HitRate is the reuse the
	// policy's routing gave up (AvailHit ≥ HitRate always; equal with one worker).
	AvailHit float64 `json:"available_hit_rate"`
}

// Policy routes requests. Implementations see the simulation through View and are told about
// each request's lifecycle. They must be deterministic for a given seed.
type Policy interface {
	Name() string
	// Pick returns the worker for request id (an index into the trace), -1 to reject it, or
	// Held when the policy keeps it in a router queue (only a Holder may).
	Pick(v *View, id int, r *Request) int
	// PrefillDone reports an admitted request's first token (prefill_complete), Done its end
	// (free; also sent for a request the worker rejected).
	PrefillDone(id int)
	Done(id int)
}

// Held is Pick's answer for a request the policy parks in its router queue; the simulation
// asks the Holder to release parked requests after every lifecycle event.
const Held = -2

// Holder is a Policy with a router queue. Release is called after every first token and every
// finished request, and calls admit(id, worker) for each parked request that may go now, in
// dispatch order. A request held until the trace ends counts as rejected.
type Holder interface {
	Release(v *View, admit func(id, worker int))
}

// EventSink receives the workers' KV-cache events after the configured delay, as a
// deployment's KV-event subscriber does. Blocks are the trace's block ids (a Stored run's
// parent is the id of the block before it). A Policy that implements EventSink receives them
// when Run is given no other sink.
type EventSink interface {
	Stored(worker int, parent uint64, hasParent bool, blocks []uint64)
	Removed(worker int, blocks []uint64)
}

// simWorker is one worker: its engine, and what the router side knows about it.
type simWorker struct {
	eng      fleet.Worker
	inflight int
	admitted int
	metrics  fleet.Stats // the last scrape (Config.ScrapeIntervalMS > 0)
}

type reqState struct {
	worker  int
	arrival float64
	ttft    float64
	queued  bool
	first   bool // first token seen
}

// delivery is a KV event in flight to the router side.
type delivery struct {
	at     float64
	worker int
	ev     fleet.Event
}

type simulation struct {
	cfg     Config
	fleet   workerFleet
	infos   []WorkerInfo // per worker
	reqs    []Request
	freqs   []fleet.Request
	pol     Policy
	holder  Holder
	sink    EventSink
	view    *View
	workers []*simWorker
	state   []reqState
	pending []delivery // FIFO: delays are equal, so delivery order is emission order
	head    int
	buf     []fleet.Event
	now     float64
	err     error // the first contract violation of a Holder (see release)

	hitTok, availTok, totalTok float64
	preemptions                int
}

// Run replays reqs through the policy and returns its result. KV events go to sink, or to the
// policy when sink is nil and the policy is an EventSink.
func Run(cfg Config, reqs []Request, pol Policy, sink EventSink) (Result, error) {
	f, err := cfg.fleet()
	if err != nil {
		return Result{}, err
	}
	if cfg.Workers < 1 || slices.Min(f.capacities) < 1 {
		return Result{}, fmt.Errorf("sim: need ≥ 1 worker and ≥ 1 block of capacity")
	}
	if cfg.Speedup <= 0 {
		cfg.Speedup = 1
	}
	if cfg.KVEventDelayMS < 0 || math.IsNaN(cfg.KVEventDelayMS) || cfg.ScrapeIntervalMS < 0 || math.IsNaN(cfg.ScrapeIntervalMS) {
		return Result{}, fmt.Errorf("sim: KV event delay and scrape interval must not be negative")
	}
	if sink == nil {
		sink, _ = pol.(EventSink)
	}
	s := &simulation{cfg: cfg, fleet: f, reqs: reqs, pol: pol, sink: sink, state: make([]reqState, len(reqs)), infos: f.infos()}
	s.holder, _ = pol.(Holder)
	s.view = &View{sim: s}
	for w := range cfg.Workers {
		s.workers = append(s.workers, &simWorker{eng: fleet.New(f.specs[w], TraceBlockTokens, f.capacities[w])})
	}
	s.freqs = make([]fleet.Request, len(reqs))
	order := make([]int, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		s.freqs[i] = fleet.Request{ID: i, Prompt: r.Input, Output: r.Output, Blocks: r.Blocks}
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].ArrivalMS < reqs[order[b]].ArrivalMS })

	next := 0
	nextScrape := math.Inf(1)
	if cfg.ScrapeIntervalMS > 0 {
		nextScrape = 0
	}
	for {
		tw, w := math.Inf(1), -1
		for i, wk := range s.workers {
			if t := wk.eng.NextAt(); t < tw {
				tw, w = t, i
			}
		}
		td := math.Inf(1)
		if s.head < len(s.pending) {
			td = s.pending[s.head].at
		}
		ta := math.Inf(1)
		if next < len(order) {
			ta = reqs[order[next]].ArrivalMS / cfg.Speedup
		}
		if nextScrape <= min(tw, td, ta) && !math.IsInf(min(tw, td, ta), 1) {
			s.now = nextScrape
			for _, wk := range s.workers {
				wk.metrics = wk.eng.Stats()
			}
			nextScrape += cfg.ScrapeIntervalMS
			continue
		}
		switch {
		case w >= 0 && tw <= td && tw <= ta:
			s.now = tw
			s.buf = s.workers[w].eng.Advance(s.buf[:0])
			s.handle(w, s.buf)
		case s.head < len(s.pending) && td <= ta:
			d := &s.pending[s.head]
			s.now = d.at
			s.apply(d.worker, &d.ev)
			s.pending[s.head] = delivery{}
			if s.head++; s.head > 4096 && s.head*2 > len(s.pending) {
				s.pending = append(s.pending[:0], s.pending[s.head:]...)
				s.head = 0
			}
		case next < len(order):
			s.now = ta
			s.arrive(order[next])
			next++
		default:
			return s.result()
		}
	}
}

// scraped is worker w's metrics as the router last scraped them (what vLLM's /metrics
// exposes: vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc):
// the engine's current values when Config.ScrapeIntervalMS is 0.
func (s *simulation) scraped(w int) fleet.Stats {
	if s.cfg.ScrapeIntervalMS > 0 {
		return s.workers[w].metrics
	}
	return s.workers[w].eng.Stats()
}

// arrive asks the policy where request id goes.
func (s *simulation) arrive(id int) {
	st := &s.state[id]
	st.arrival = s.now
	switch w := s.pol.Pick(s.view, id, &s.reqs[id]); {
	case w == Held && s.holder != nil:
		st.worker, st.queued = held, true
	case w < 0 || w >= len(s.workers):
		st.worker = rejected
	default:
		s.admit(id, w)
	}
}

// Request states of a request that was not admitted (reqState.worker).
const (
	rejected = -1
	held     = Held
)

// admit sends request id to worker w.
func (s *simulation) admit(id, w int) {
	st := &s.state[id]
	st.worker = w
	wk := s.workers[w]
	wk.inflight++
	wk.admitted++
	s.handle(w, wk.eng.Submit(s.now, &s.freqs[id], nil))
}

// handle processes what worker w's engine reported at s.now.
func (s *simulation) handle(w int, evs []fleet.Event) {
	wk := s.workers[w]
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case fleet.Scheduled:
			st := &s.state[ev.Req]
			r := &s.reqs[ev.Req]
			st.queued = st.queued || ev.Waited
			// The request's own engine already committed the blocks it is about to compute
			// (vLLM caches them when it schedules them), so its hit there is CachedTokens.
			avail := ev.CachedTokens
			for _, o := range s.workers {
				if o != wk {
					avail = max(avail, o.eng.CachedPrefix(r.Blocks, r.Input))
				}
			}
			s.hitTok += float64(ev.CachedTokens)
			s.availTok += float64(avail)
			s.totalTok += float64(r.Input)
		case fleet.Stored, fleet.Removed:
			if s.cfg.KVEventDelayMS == 0 {
				s.apply(w, ev)
			} else {
				s.pending = append(s.pending, delivery{at: s.now + s.cfg.KVEventDelayMS, worker: w, ev: *ev})
			}
		case fleet.FirstToken:
			st := &s.state[ev.Req]
			st.ttft, st.first = s.now-st.arrival, true
			s.pol.PrefillDone(ev.Req)
			s.release()
		case fleet.Finished:
			wk.inflight--
			s.pol.Done(ev.Req)
			s.release()
		case fleet.Rejected:
			st := &s.state[ev.Req]
			st.worker = rejected
			wk.inflight--
			s.pol.Done(ev.Req)
			s.release()
		case fleet.Preempted:
			s.preemptions++
		}
	}
}

// apply delivers one KV event of worker w to the router side.
func (s *simulation) apply(w int, ev *fleet.Event) {
	switch {
	case s.sink == nil:
	case ev.Kind == fleet.Stored:
		s.sink.Stored(w, ev.Parent, ev.HasParent, ev.Blocks)
	default:
		s.sink.Removed(w, ev.Blocks)
	}
}

// release lets a Holder dispatch the requests it parked. A worker of −1 leaves the request
// unadmitted (it counts as rejected); admitting a request that is not held, or to a worker
// that does not exist, is a broken Holder and fails the run.
func (s *simulation) release() {
	if s.holder == nil {
		return
	}
	s.holder.Release(s.view, func(id, w int) {
		switch {
		case id < 0 || id >= len(s.state) || s.state[id].worker != held:
			s.fail(fmt.Errorf("sim: %s released request %d, which it does not hold", s.pol.Name(), id))
		case w == rejected:
			s.state[id].worker = rejected
		case w < 0 || w >= len(s.workers):
			s.fail(fmt.Errorf("sim: %s released request %d to worker %d of %d", s.pol.Name(), id, w, len(s.workers)))
		default:
			s.admit(id, w)
		}
	})
}

func (s *simulation) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *simulation) result() (Result, error) {
	if s.err != nil {
		return Result{}, s.err
	}
	res := Result{Policy: s.pol.Name(), Model: s.fleet.name, Requests: len(s.reqs), IdealHit: IdealHitRate(s.reqs),
		IdealHitAtCapacity: IdealHitRateAt(s.reqs, s.fleet.totalBlocks()), FleetBlocks: s.fleet.totalBlocks(), MakespanS: s.now / 1000, Preemptions: s.preemptions}
	if s.totalTok > 0 {
		res.HitRate = s.hitTok / s.totalTok
		res.AvailHit = s.availTok / s.totalTok
	}
	var ttfts []float64
	for i := range s.state {
		st := &s.state[i]
		if st.worker < 0 || !st.first {
			res.Rejected++ // rejected, or held until the end
			continue
		}
		ttfts = append(ttfts, st.ttft)
		res.TTFTMean += st.ttft
		if st.queued {
			res.Queued++
		}
	}
	if len(ttfts) > 0 {
		res.TTFTMean /= float64(len(ttfts))
		slices.Sort(ttfts)
		res.TTFTP50 = percentile(ttfts, 0.50)
		res.TTFTP99 = percentile(ttfts, 0.99)
		res.TTFTP999 = percentile(ttfts, 0.999)
		res.TTFTMax = ttfts[len(ttfts)-1]
	}
	counts := make([]float64, len(s.workers))
	for i, w := range s.workers {
		counts[i] = float64(w.admitted)
	}
	res.LoadCV = cv(counts)
	return res, nil
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func cv(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if mean == 0 {
		return 0
	}
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v/float64(len(xs))) / mean
}
