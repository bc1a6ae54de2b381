package engine

// Benchmarks of the selection hot path on a fleet-sized partition: 64 workers × 8 DP ranks
// (512 owners), block size 16, more than a million indexed (block, owner) entries fed through
// ApplyKVEvents, a few thousand live bookings, and prompts of 32–64 blocks.
//
// Workload shape (realistic for chat/agent traffic):
//   - 32 system prompts of 16 blocks; their popularity is skewed (prompt k is drawn with weight
//     1/(k+1)), so a few prefixes are held by almost every rank and most by few;
//   - each rank holds 54 conversations = one system prompt + a private tail of 8–56 blocks
//     (the long tail), stored as one KV event chain each;
//   - queries extend a stored conversation (sharing the system prompt and part of its tail,
//     so a few ranks match deep and many match the system prompt) with new blocks, 32–64 in all.
//
// Besides ns/op and allocs/op, the selection benchmarks report p50-ns and p99-ns of single
// operations (timed individually, so each includes ~30 ns of clock overhead) and the index
// size (entries, bytes/entry).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

const (
	benchWorkers   = 64
	benchRanks     = 8
	benchBS        = 16
	benchSystems   = 32
	benchSysBlocks = 16
	benchConvs     = 54 // conversations per rank
	benchLiveBooks = 4096
)

// benchFleet is the shared, read-mostly benchmark state (built once per process).
type benchFleet struct {
	e       *Engine
	prompts [][]uint32
	entries int
	bytes   int
	build   time.Duration
}

var (
	fleetOnce sync.Once
	fleet     *benchFleet
)

// systemTokens returns system prompt k (16 blocks of distinct tokens).
func systemTokens(k int) []uint32 { return toks(k*benchSysBlocks*benchBS, benchSysBlocks*benchBS) }

// convTokens returns conversation c's private tail of n blocks.
func convTokens(c, n int) []uint32 { return toks(10_000_000+c*64*benchBS, n*benchBS) }

// buildFleet registers the fleet and indexes its conversations.
func buildFleet(tb testing.TB) *benchFleet {
	start := time.Now()
	rng := rand.New(rand.NewPCG(42, 42))
	cfg := DefaultConfig()
	e, err := New(cfg, Options{Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		tb.Fatal(err)
	}
	for w := uint64(1); w <= benchWorkers; w++ {
		s := spec(w, dp(uint32(w-1)*benchRanks, benchRanks), func(s *WorkerSpec) {
			s.BlockSize = ptr(uint32(benchBS))
			s.TotalKVBlocks = ptr(uint64(65536))
		})
		if rec, err := e.UpsertWorker(s); err != nil || rec.Lifecycle != LifecycleSchedulable {
			tb.Fatalf("register %d: %v %q", w, err, rec.NotSchedulableReasons)
		}
	}
	// Skewed system-prompt popularity: weight 1/(k+1).
	cum := make([]float64, benchSystems)
	total := 0.0
	for k := range cum {
		total += 1 / float64(k+1)
		cum[k] = total
	}
	pickSystem := func() int {
		u := rng.Float64() * total
		k, _ := slices.BinarySearch(cum, u)
		return min(k, benchSystems-1)
	}
	type conv struct{ sys, id, blocks int }
	var convs []conv
	convID := 0
	for w := uint64(1); w <= benchWorkers; w++ {
		for r := uint32(0); r < benchRanks; r++ {
			o := kvwire.Owner{Worker: w, Rank: uint32(w-1)*benchRanks + r}
			events := make([]KVEvent, 0, benchConvs)
			for c := 0; c < benchConvs; c++ {
				cv := conv{sys: pickSystem(), id: convID, blocks: 8 + rng.IntN(49)}
				convID++
				convs = append(convs, cv)
				ev := storedEventBS(o, cat(systemTokens(cv.sys), convTokens(cv.id, cv.blocks)), benchBS)
				events = append(events, ev)
			}
			st := e.ApplyKVEvents(o, events)
			if st.Dropped != 0 || st.SizeMismatches != 0 {
				tb.Fatalf("indexing %v: %+v", o, st)
			}
		}
	}
	// Queries: extend a stored conversation, 32–64 blocks in all.
	prompts := make([][]uint32, 2048)
	for i := range prompts {
		cv := convs[rng.IntN(len(convs))]
		keep := min(cv.blocks, 8+rng.IntN(40))
		total := 32 + rng.IntN(33)
		fresh := max(0, total-benchSysBlocks-keep)
		prompts[i] = cat(systemTokens(cv.sys), convTokens(cv.id, keep), toks(500_000_000+i*64*benchBS, fresh*benchBS))
	}
	// Live load: bookings spread over every rank.
	for i := 0; i < benchLiveBooks; i++ {
		w := uint64(1 + rng.IntN(benchWorkers))
		r := uint32(w-1)*benchRanks + uint32(rng.IntN(benchRanks))
		pr := prompts[rng.IntN(len(prompts))]
		_, err := e.Reserve(&ReservationRequest{SelectionID: ptr(fmt.Sprint("live", i)), WorkerID: ptr(w), DPRank: ptr(r), Prompt: tokenPrompt(pr)}, t0)
		if err != nil {
			tb.Fatal(err)
		}
	}
	_ = e.TakeEffects(nil)
	st := e.parts[defKey].index.Stats()
	return &benchFleet{e: e, prompts: prompts, entries: st.Entries, bytes: st.Bytes, build: time.Since(start)}
}

// storedEventBS is storedEvent from the root at block size bs.
func storedEventBS(o kvwire.Owner, tokens []uint32, bs int) KVEvent {
	return storedEvent(o, TierOf("device"), nil, tokens, bs)
}

func getFleet(b *testing.B) *benchFleet {
	b.Helper()
	fleetOnce.Do(func() { fleet = buildFleet(b) })
	if fleet.entries < 1_000_000 {
		b.Fatalf("fleet has %d entries, want ≥ 1M", fleet.entries)
	}
	return fleet
}

// reportLatency adds p50/p99 of the individually timed operations and the index size.
func reportLatency(b *testing.B, f *benchFleet, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
	b.ReportMetric(float64(f.entries), "entries")
	b.ReportMetric(float64(f.bytes)/float64(f.entries), "B/entry")
}

// BenchmarkSelect: query-only selection (POST /select without selection_id).
func BenchmarkSelect(b *testing.B) {
	f := getFleet(b)
	reqs := make([]*SelectRequest, len(f.prompts))
	for i, p := range f.prompts {
		reqs[i] = selReq("", p)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		if _, err := f.e.Select(reqs[i%len(reqs)], t0); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	reportLatency(b, f, lat)
}

// BenchmarkSelectAndReserve: an atomic selection and booking followed by its free (and the
// outbox drain the service performs after each call).
func BenchmarkSelectAndReserve(b *testing.B) {
	f := getFleet(b)
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprint("bench-", i)
	}
	reqs := make([]*SelectRequest, len(f.prompts))
	for i, p := range f.prompts {
		reqs[i] = &SelectRequest{Prompt: tokenPrompt(p)}
	}
	var fx []ReplicaEvent
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := reqs[i%len(reqs)]
		req.SelectionID = &ids[i%len(ids)]
		t := time.Now()
		if _, err := f.e.SelectAndReserve(req, t0); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
		if err := f.e.Free(ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		fx = f.e.TakeEffects(fx[:0])
	}
	b.StopTimer()
	reportLatency(b, f, lat)
}

// BenchmarkSelectSteps isolates the pipeline's stages on the same fleet, to attribute the cost
// of one selection: normalisation (hashing), index match, load prefix walk, and scoring.
func BenchmarkSelectSteps(b *testing.B) {
	f := getFleet(b)
	p := f.e.parts[defKey]
	w := f.e.weightsFor(nil)
	norms := make([]normalized, len(f.prompts))
	for i, pr := range f.prompts {
		prompt := tokenPrompt(pr)
		norms[i], _ = f.e.normalize(p, &prompt, true, true)
	}
	b.Run("normalize", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			prompt := tokenPrompt(f.prompts[i%len(f.prompts)])
			_, _ = f.e.normalize(p, &prompt, true, true)
		}
	})
	b.Run("index_match", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p.index.Match(norms[i%len(norms)].block, &f.e.scratch.match)
		}
	})
	b.Run("active_prefix", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			p.tracker.ActivePrefix(norms[i%len(norms)].seq, &f.e.scratch.prefix)
		}
	})
	b.Run("score", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			f.e.score(p, &norms[i%len(norms)], w)
		}
	})
}

// TestBenchFleetShape checks the benchmark workload itself (so a broken generator cannot make
// the numbers meaningless): ≥ 1M entries, prompts of 32–64 blocks, and prompts that match one
// rank deep (into a conversation tail) while other ranks match only the system prompt. Skipped in -short mode (it builds the fleet).
func TestBenchFleetShape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1M-entry fleet")
	}
	f := buildFleet(t)
	if f.entries < 1_000_000 {
		t.Fatalf("%d entries", f.entries)
	}
	deep, shallow := 0, 0
	for i, pr := range f.prompts {
		if n := len(pr) / benchBS; n < 32 || n > 64 || len(pr)%benchBS != 0 {
			t.Fatalf("prompt %d has %d tokens", i, len(pr))
		}
		if i >= 64 {
			continue
		}
		res, err := f.e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(pr)})
		noErr(t, err)
		best, matching := uint64(0), 0
		for _, w := range res.Workers {
			best = max(best, w.DeviceBlocks)
			if w.DeviceBlocks > 0 {
				matching++
			}
		}
		if best > benchSysBlocks && matching > 1 {
			deep++
		} else {
			shallow++
		}
	}
	if deep == 0 {
		t.Fatalf("no prompt matched past the system prompt (deep %d, shallow %d)", deep, shallow)
	}
	t.Logf("fleet: %d entries, %.0f B/entry, built in %v; of 64 prompts %d match some rank past the system prompt", f.entries, float64(f.bytes)/float64(f.entries), f.build, deep)
}
