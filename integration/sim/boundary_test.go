package sim

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// probe routes everything to worker 0 and records, at each arrival, how many blocks of the
// request the KV events delivered so far show cached on worker 0.
type probe struct {
	kvEventIndex
	seen []int
}

func (p *probe) Name() string { return "probe" }
func (p *probe) Pick(_ *View, _ int, r *Request) int {
	p.seen = append(p.seen, p.Prefix(0, r.Blocks))
	return 0
}
func (p *probe) PrefillDone(int) {}
func (p *probe) Done(int)        {}

// TestKVEventDelayHidesFreshBlocks: a policy learns of blocks only through KV events, which
// arrive KVEventDelayMS after the engine commits them.
func TestKVEventDelayHidesFreshBlocks(t *testing.T) {
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	blocks := []uint64{1, 2, 3, 4}
	a := Request{ArrivalMS: 0, Input: 4 * TraceBlockTokens, Output: 1, Blocks: blocks}
	done := spec.Step.PrefillMS(0, a.Input, spec.MaxNumBatchedTokens) // A's blocks are committed then
	for _, tc := range []struct {
		name    string
		delay   float64
		arriveB float64
		want    int
	}{
		{"instant", 0, done + 1, 4},
		{"still in flight", 5, done + 1, 0},
		{"delivered", 5, done + 6, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := a
			b.ArrivalMS = tc.arriveB
			p := &probe{}
			cfg := Config{Workers: 2, CapacityBlocks: 100, Model: fleet.PresetH100_8B, KVEventDelayMS: tc.delay}
			res, err := Run(cfg, []Request{a, b}, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.seen[0] != 0 || p.seen[1] != tc.want {
				t.Fatalf("cached prefix seen at arrivals %v, want [0 %d]", p.seen, tc.want)
			}
			// Whatever the policy saw, the engine itself reuses A's blocks (3 of 4: one prompt
			// token is always computed).
			if want := 3.0 * TraceBlockTokens / float64(2*a.Input); res.HitRate != want {
				t.Fatalf("hit rate %v, want %v", res.HitRate, want)
			}
		})
	}
}

// TestViewRegisteredFields: a policy sees what workers register, from the preset.
func TestViewRegisteredFields(t *testing.T) {
	var got WorkerInfo
	p := &infoProbe{got: &got}
	if _, err := Run(Config{Workers: 1, Model: fleet.PresetH100x870}, []Request{{Input: 10, Output: 1, Blocks: []uint64{1}}}, p, nil); err != nil {
		t.Fatal(err)
	}
	spec, _ := fleet.Preset(fleet.PresetH100x870)
	want := WorkerInfo{BlockSize: TraceBlockTokens, TotalKVBlocks: spec.NumBlocks(TraceBlockTokens), MaxNumBatchedTokens: spec.MaxNumBatchedTokens, MaxNumSeqs: spec.MaxNumSeqs}
	if got != want {
		t.Fatalf("registered %+v, want %+v", got, want)
	}
}

type infoProbe struct{ got *WorkerInfo }

func (p *infoProbe) Name() string { return "info" }
func (p *infoProbe) Pick(v *View, _ int, _ *Request) int {
	*p.got = v.Worker(0)
	return 0
}
func (p *infoProbe) PrefillDone(int) {}
func (p *infoProbe) Done(int)        {}

// scrapeProbe records the scraped running count of worker 0 at each arrival.
type scrapeProbe struct{ seen []int }

func (p *scrapeProbe) Name() string { return "scrape" }
func (p *scrapeProbe) Pick(v *View, _ int, _ *Request) int {
	p.seen = append(p.seen, v.sim.scraped(0).Running)
	return 0
}
func (p *scrapeProbe) PrefillDone(int) {}
func (p *scrapeProbe) Done(int)        {}

// TestScrapedMetricsLag: with a scrape interval the router sees the engine's counts as of the
// last scrape, not as they are.
func TestScrapedMetricsLag(t *testing.T) {
	long := func(at float64, id uint64) Request {
		return Request{ArrivalMS: at, Input: 2 * TraceBlockTokens, Output: 2000, Blocks: []uint64{id, id + 1}}
	}
	reqs := []Request{long(0, 10), long(10, 20), long(1500, 30)}
	for _, tc := range []struct {
		interval float64
		want     []int
	}{
		{0, []int{0, 1, 2}},      // live: each arrival sees the ones before it running
		{1000, []int{0, 0, 2}},   // scraped at 0 and 1000 ms
		{100000, []int{0, 0, 0}}, // only the scrape at 0
	} {
		p := &scrapeProbe{}
		if _, err := Run(Config{Workers: 1, CapacityBlocks: 100, ScrapeIntervalMS: tc.interval}, reqs, p, nil); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.seen, tc.want) {
			t.Fatalf("interval %v: running seen %v, want %v", tc.interval, p.seen, tc.want)
		}
	}
}
