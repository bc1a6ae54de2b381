package load

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// Benchmark fixture: one partition of 64 workers × 8 ranks (512 owners)
// holding 100k live bookings of 64 blocks each. A prompt is
// [global prefix G][family prefix][conversation prefix][unique tail], with
// G blocks shared by every booking (a system prompt; 0 = none), 12 family
// blocks from one of 64 families, 16 conversation blocks from one of 4096
// conversations, and 64−G−28 unique blocks. A conversation sticks to one
// owner, so a family prefix is live on about 60 owners and a conversation
// prefix on one.
type fixture struct {
	tr      *Tracker
	owners  []kvwire.Owner
	convs   int
	global  int
	prompts [][]uint64 // a few live prompts, for queries
}

const (
	fixOwnersW   = 64
	fixRanks     = 8
	fixBookings  = 100_000
	fixBlocks    = 64
	fixFamilies  = 64
	fixConvs     = 4096
	fixFamilyLen = 12
	fixConvLen   = 16
)

var (
	fixMu    sync.Mutex
	fixCache = map[int]*fixture{}
)

// fixOwnerOf is the owner index a conversation sticks to (a hash, so a
// family's 64 conversations spread over about 60 owners).
func fixOwnerOf(c int) int { return int(mix(uint64(c)) % (fixOwnersW * fixRanks)) }

// prompt builds the block contents of booking n of conversation c.
func fixPrompt(global, c int, n uint64) []uint64 {
	blocks := make([]uint64, 0, fixBlocks)
	for i := range global {
		blocks = append(blocks, uint64(1_000_000+i))
	}
	fam := c % fixFamilies
	for i := range fixFamilyLen {
		blocks = append(blocks, uint64(2_000_000+fam*100+i))
	}
	for i := range fixConvLen {
		blocks = append(blocks, uint64(3_000_000+c*100+i))
	}
	for len(blocks) < fixBlocks {
		blocks = append(blocks, 1<<40+n*100+uint64(len(blocks)))
	}
	return blocks
}

// getFixture builds (once per global-prefix length) the 100k-booking
// partition. Benchmarks only read it or restore it after each iteration.
func getFixture(b *testing.B, global int) *fixture {
	fixMu.Lock()
	defer fixMu.Unlock()
	if f := fixCache[global]; f != nil {
		return f
	}
	f := &fixture{tr: NewTracker(), convs: fixConvs, global: global}
	for w := range fixOwnersW {
		for r := range fixRanks {
			o := kvwire.Owner{Worker: uint64(1000 + w), Rank: uint32(r)}
			f.owners = append(f.owners, o)
			f.tr.AddOwner(o)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range fixBookings {
		c := rng.IntN(fixConvs)
		o := f.owners[fixOwnerOf(c)]
		h := chain(fixPrompt(global, c, uint64(n)))
		if err := f.tr.Add(Booking{ID: fmt.Sprintf("fix-%d", n), Owner: o, Hashes: h, PrefillTokens: 512}); err != nil {
			b.Fatal(err)
		}
		if n < 64 {
			f.prompts = append(f.prompts, h)
		}
	}
	fixCache[global] = f
	return f
}

// BenchmarkActivePrefix queries a 64-block prompt against the fixture:
//   - conv-hit: a new turn of a live conversation (family prefix on ~60
//     owners, conversation prefix on 1, unique tail on none): the typical
//     request;
//   - live-prompt: an exact live prompt (full 64-block match on 1 owner);
//   - miss: an unknown first block;
//   - global16-conv-hit: as conv-hit with a 16-block system prompt live on
//     all 512 owners, so the answer has 512 entries.
func BenchmarkActivePrefix(b *testing.B) {
	cases := []struct {
		name   string
		global int
		query  func(f *fixture) []uint64
	}{
		{"conv-hit", 0, func(f *fixture) []uint64 { return chain(fixPrompt(0, 17, 1<<30)) }},
		{"live-prompt", 0, func(f *fixture) []uint64 { return f.prompts[3] }},
		{"miss", 0, func(f *fixture) []uint64 { return chain(append([]uint64{1 << 60}, fixPrompt(0, 17, 1<<30)[1:]...)) }},
		{"global16-conv-hit", 16, func(f *fixture) []uint64 { return chain(fixPrompt(16, 17, 1<<30)) }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f := getFixture(b, tc.global)
			q := tc.query(f)
			var m PrefixMatch
			b.ReportAllocs()
			for b.Loop() {
				f.tr.ActivePrefix(q, &m)
			}
			b.ReportMetric(float64(m.Len()), "owners")
		})
	}
}

// BenchmarkAddFree books and frees one 64-block booking on the fixture:
// conv-turn shares the family and conversation prefix (the common case);
// unique shares nothing (a fresh root edge).
func BenchmarkAddFree(b *testing.B) {
	f := getFixture(b, 0)
	cases := []struct {
		name   string
		hashes []uint64
	}{
		{"conv-turn", chain(fixPrompt(0, 17, 1<<31))},
		{"unique", chain(append([]uint64{1 << 50}, fixPrompt(0, 17, 1<<31)[1:]...))},
	}
	o := f.owners[fixOwnerOf(17)]
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			bk := Booking{ID: "bench", Owner: o, Hashes: tc.hashes, PrefillTokens: 100}
			b.ReportAllocs()
			for b.Loop() {
				if err := f.tr.Add(bk); err != nil {
					b.Fatal(err)
				}
				if err := f.tr.Free("bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOutputBlock appends decayed output blocks to a booking whose
// 64-block prompt has a 36-block exclusive suffix, freeing it every 64
// blocks so it does not grow without bound.
func BenchmarkOutputBlock(b *testing.B) {
	f := getFixture(b, 0)
	o := f.owners[fixOwnerOf(17)]
	bk := Booking{ID: "bench-out", Owner: o, Hashes: chain(fixPrompt(0, 17, 1<<32))}
	if err := f.tr.Add(bk); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := f.tr.OutputBlock("bench-out", uint64(i), 0.5, true); err != nil {
			b.Fatal(err)
		}
		if i++; i%64 == 0 {
			_ = f.tr.Free("bench-out")
			_ = f.tr.Add(bk)
		}
	}
	b.StopTimer()
	_ = f.tr.Free("bench-out")
}

// BenchmarkLoads lists all 512 owners' loads into a reused slice.
func BenchmarkLoads(b *testing.B) {
	f := getFixture(b, 0)
	dst := make([]RankLoad, 0, len(f.owners))
	b.ReportAllocs()
	for b.Loop() {
		dst = f.tr.Loads(dst[:0])
	}
	if len(dst) != len(f.owners) {
		b.Fatalf("%d loads", len(dst))
	}
}

// BenchmarkMemoryPerBooking builds a 512-owner partition with 20k bookings
// (the fixture's prompt shape) and reports the tracker's own heap per live
// booking: trie nodes, entries, maps and booking records, excluding the
// callers' Hashes slices (64 × 8 B each), which the tracker retains.
func BenchmarkMemoryPerBooking(b *testing.B) {
	const n = 20_000
	hashes := make([][]uint64, n)
	convs := make([]int, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range hashes {
		convs[i] = rng.IntN(fixConvs)
		hashes[i] = chain(fixPrompt(0, convs[i], uint64(i)))
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%d", i)
	}
	var perBooking float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := NewTracker()
		for w := range fixOwnersW * fixRanks {
			tr.AddOwner(kvwire.Owner{Worker: uint64(w / fixRanks), Rank: uint32(w % fixRanks)})
		}
		for i, h := range hashes {
			o := fixOwnerOf(convs[i])
			if err := tr.Add(Booking{ID: ids[i], Owner: kvwire.Owner{Worker: uint64(o / fixRanks), Rank: uint32(o % fixRanks)}, Hashes: h}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perBooking = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(perBooking, "B/booking")
}
