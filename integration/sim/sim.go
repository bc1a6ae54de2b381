package sim

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// Config describes one simulation run.
type Config struct {
	Workers        int     // number of workers (≥ 1)
	CapacityBlocks int     // per-worker KV cache capacity in 512-token blocks
	Speedup        float64 // arrival-time compression (2 = twice the trace's rate); default 1
	Seed           uint64  // random seed for policies
}

// Result is one policy's outcome on a trace.
type Result struct {
	Policy   string  `json:"policy"`
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
	IdealHit float64 `json:"ideal_hit_rate"`
	// IdealHitAtCapacity is IdealHitRateAt(workers × capacity): the reuse of one LRU cache as
	// large as the whole fleet's, the ceiling the routing-quality targets are stated against.
	IdealHitAtCapacity float64 `json:"ideal_hit_rate_at_capacity"`
	MakespanS          float64 `json:"makespan_s"`

	// AvailHit is the token hit rate the run would have had if every prefill had used the longest
	// prefix cached on any worker when it started: the ceiling routing could reach given the
	// caches this run produced. AvailHit − HitRate is the reuse the policy's routing gave up
	// (AvailHit ≥ HitRate always; equal with one worker). Unlike IdealHit it counts eviction.
	AvailHit float64 `json:"available_hit_rate"`
}

// Policy routes requests. Implementations see the simulation through View and are told about
// each request's lifecycle. They must be deterministic for a given seed.
type Policy interface {
	Name() string
	// Pick returns the worker for request id (an index into the trace), -1 to reject it, or
	// Held when the policy keeps it in a router queue (only a Holder may).
	Pick(v *View, id int, r *Request) int
	// PrefillDone and Done report lifecycle progress of an admitted request.
	PrefillDone(id int)
	Done(id int)
}

// Held is Pick's answer for a request the policy parks in its router queue; the simulation
// asks the Holder to release parked requests after every lifecycle event.
const Held = -2

// Holder is a Policy with a router queue. Release is called after every prefill completion and
// every finished request, and calls admit(id, worker) for each parked request that may go now,
// in dispatch order. A request held until the trace ends counts as rejected.
type Holder interface {
	Release(v *View, admit func(id, worker int))
}

// View is the read-only state policies may consult.
type View struct {
	sim *simulation
}

// Workers returns the number of workers.
func (v *View) Workers() int { return len(v.sim.workers) }

// InFlight returns worker w's admitted, unfinished requests.
func (v *View) InFlight(w int) int { return v.sim.workers[w].inflight }

// PendingPrefillTokens returns the uncached-at-arrival tokens queued or running on w's prefill.
func (v *View) PendingPrefillTokens(w int) int { return v.sim.workers[w].pendingTokens }

// CachedPrefix returns how many leading blocks of r are cached on w right now.
func (v *View) CachedPrefix(w int, r *Request) int { return v.sim.workers[w].cache.Prefix(r.Blocks) }

type simWorker struct {
	cache         *prefixCache
	queue         []int // request ids waiting for prefill, FIFO
	busy          bool  // a prefill is running
	running       int   // uncached tokens of the running prefill
	inflight      int
	pendingTokens int
	admitted      int
}

type reqState struct {
	worker    int
	hitBlocks int
	arrival   float64
	ttft      float64
	estTokens int
	queued    bool

	// availBlocks is the longest prefix of the request cached on any worker at prefill start.
	availBlocks int
}

// event kinds, ordered so that at equal times completions are processed before arrivals.
const (
	evDecodeDone = iota
	evPrefillDone
	evArrival
)

type event struct {
	at   float64
	kind int
	id   int
	seq  int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	if q[i].kind != q[j].kind {
		return q[i].kind < q[j].kind
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simulation struct {
	cfg     Config
	reqs    []Request
	pol     Policy
	workers []*simWorker
	state   []reqState
	q       eventQueue
	seq     int
	now     float64
	err     error // the first contract violation of a Holder (see release)
}

// PrefillMS is the prefill time of t uncached tokens (Dynamo mocker polynomial).
func PrefillMS(t int) float64 {
	x := float64(t)
	return 4.209989e-07*x*x + 1.518344e-02*x + 16.50142
}

// ITLMS is the decode step time at cache utilisation u ∈ [0, 1].
func ITLMS(u float64) float64 {
	return max(1, -25.74*u*u+54.01*u+5.74)
}

// Run replays reqs through the policy and returns its result.
func Run(cfg Config, reqs []Request, pol Policy, sink EventSink) (Result, error) {
	if cfg.Workers < 1 || cfg.CapacityBlocks < 1 {
		return Result{}, fmt.Errorf("sim: need ≥ 1 worker and ≥ 1 block of capacity")
	}
	if cfg.Speedup <= 0 {
		cfg.Speedup = 1
	}
	s := &simulation{cfg: cfg, reqs: reqs, pol: pol, state: make([]reqState, len(reqs))}
	var es eventSink
	if sink != nil {
		es = sinkAdapter{sink}
	}
	for range cfg.Workers {
		s.workers = append(s.workers, &simWorker{cache: newPrefixCache(cfg.CapacityBlocks, es)})
	}
	s.q = make(eventQueue, 0, len(reqs)+2*cfg.Workers)
	for i := range reqs {
		s.push(reqs[i].ArrivalMS/cfg.Speedup, evArrival, i)
	}
	view := &View{sim: s}
	holder, _ := pol.(Holder)
	res := Result{Policy: pol.Name(), Requests: len(reqs), IdealHit: IdealHitRate(reqs),
		IdealHitAtCapacity: IdealHitRateAt(reqs, cfg.Workers*cfg.CapacityBlocks)}
	var hitTok, availTok, totalTok float64
	for s.q.Len() > 0 {
		ev := heap.Pop(&s.q).(event)
		s.now = ev.at
		switch ev.kind {
		case evArrival:
			st := &s.state[ev.id]
			st.arrival = s.now
			switch w := pol.Pick(view, ev.id, &reqs[ev.id]); {
			case w == Held && holder != nil:
				st.worker, st.queued = held, true
			case w < 0 || w >= len(s.workers):
				st.worker = rejected
			default:
				s.admit(ev.id, w)
			}
		case evPrefillDone:
			st := &s.state[ev.id]
			r := &reqs[ev.id]
			wk := s.workers[st.worker]
			wk.cache.insert(st.worker, r.Blocks, st.hitBlocks)
			wk.busy = false
			wk.pendingTokens -= st.estTokens
			st.ttft = s.now - st.arrival
			hitTok += float64(min(st.hitBlocks*TraceBlockTokens, r.Input))
			availTok += float64(min(st.availBlocks*TraceBlockTokens, r.Input))
			totalTok += float64(r.Input)
			pol.PrefillDone(ev.id)
			s.push(s.now+float64(r.Output)*ITLMS(wk.cache.Used()), evDecodeDone, ev.id)
			s.startPrefill(st.worker)
			s.release(holder, view)
		case evDecodeDone:
			st := &s.state[ev.id]
			wk := s.workers[st.worker]
			wk.cache.Release(reqs[ev.id].Blocks)
			wk.inflight--
			pol.Done(ev.id)
			s.release(holder, view)
		}
	}
	if s.err != nil {
		return Result{}, s.err
	}
	res.MakespanS = s.now / 1000
	if totalTok > 0 {
		res.HitRate = hitTok / totalTok
		res.AvailHit = availTok / totalTok
	}
	var ttfts []float64
	for i := range s.state {
		if s.state[i].worker < 0 {
			res.Rejected++ // rejected, or held until the end
			continue
		}
		ttfts = append(ttfts, s.state[i].ttft)
		res.TTFTMean += s.state[i].ttft
		if s.state[i].queued {
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

// Request states of a request that was not admitted (reqState.worker).
const (
	rejected = -1
	held     = Held
)

// admit sends request id to worker w's prefill queue.
func (s *simulation) admit(id, w int) {
	r := &s.reqs[id]
	st := &s.state[id]
	st.worker = w
	wk := s.workers[w]
	wk.inflight++
	wk.admitted++
	st.estTokens = max(0, r.Input-wk.cache.Prefix(r.Blocks)*TraceBlockTokens)
	wk.pendingTokens += st.estTokens
	wk.queue = append(wk.queue, id)
	if wk.busy {
		st.queued = true
	}
	s.startPrefill(w)
}

// release lets a Holder dispatch the requests it parked. A worker of −1 leaves the request
// unadmitted (it counts as rejected); admitting a request that is not held, or to a worker
// that does not exist, is a broken Holder and fails the run.
func (s *simulation) release(h Holder, v *View) {
	if h == nil {
		return
	}
	h.Release(v, func(id, w int) {
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

func (s *simulation) push(at float64, kind, id int) {
	s.seq++
	heap.Push(&s.q, event{at: at, kind: kind, id: id, seq: s.seq})
}

// startPrefill begins the next queued prefill on worker w if it is idle.
func (s *simulation) startPrefill(w int) {
	wk := s.workers[w]
	if wk.busy || len(wk.queue) == 0 {
		return
	}
	id := wk.queue[0]
	wk.queue = wk.queue[1:]
	r := &s.reqs[id]
	st := &s.state[id]
	st.hitBlocks = wk.cache.Prefix(r.Blocks)
	st.availBlocks = st.hitBlocks
	for _, o := range s.workers {
		st.availBlocks = max(st.availBlocks, o.cache.Prefix(r.Blocks))
	}
	wk.cache.Pin(r.Blocks[:st.hitBlocks])
	wk.busy = true
	uncached := max(0, r.Input-st.hitBlocks*TraceBlockTokens)
	wk.running = uncached
	s.push(s.now+PrefillMS(uncached), evPrefillDone, id)
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

// EventSink receives the simulated workers' KV-cache events (engine-backed policies feed them
// into the selection engine's index).
type EventSink interface {
	Stored(worker int, parent uint64, hasParent bool, blocks []uint64)
	Removed(worker int, blocks []uint64)
}

type sinkAdapter struct{ s EventSink }

func (a sinkAdapter) stored(w int, p uint64, hp bool, b []uint64) { a.s.Stored(w, p, hp, b) }
func (a sinkAdapter) removed(w int, b []uint64)                   { a.s.Removed(w, b) }

// Now returns the simulation clock in milliseconds.
func (v *View) Now() float64 { return v.sim.now }
