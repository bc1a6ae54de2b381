package prefixcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCacheTable walks a 4-block cache through stores, hits, releases and evictions and pins
// the exact evictions and new-block runs of each step.
func TestCacheTable(t *testing.T) {
	type step struct {
		op      string // "acquire" (prefix+pin+store), "release", "clear"
		hashes  []uint64
		hit     int      // expected cached prefix at acquire
		evicted []uint64 // expected evictions
		runs    [][2]int // expected new runs
		clearOK bool
	}
	tests := []struct {
		name  string
		cap   int
		steps []step
	}{
		{"store then hit", 4, []step{
			{op: "acquire", hashes: []uint64{1, 2, 3}, hit: 0, runs: [][2]int{{0, 3}}},
			{op: "release", hashes: []uint64{1, 2, 3}},
			{op: "acquire", hashes: []uint64{1, 2, 3}, hit: 3},
			{op: "release", hashes: []uint64{1, 2, 3}},
		}},
		{"tail-first release evicts the suffix first", 4, []step{
			{op: "acquire", hashes: []uint64{1, 2, 3}, runs: [][2]int{{0, 3}}},
			{op: "release", hashes: []uint64{1, 2, 3}},
			{op: "acquire", hashes: []uint64{7, 8}, evicted: []uint64{3}, runs: [][2]int{{0, 2}}},
			{op: "release", hashes: []uint64{7, 8}},
			// LRU now: 2, 1, 8, 7 (release order 3→1 then 8→7).
			{op: "acquire", hashes: []uint64{9, 10, 11}, evicted: []uint64{2, 1, 8}, runs: [][2]int{{0, 3}}},
		}},
		{"pinned blocks are never evicted; overcommit instead", 2, []step{
			{op: "acquire", hashes: []uint64{1, 2}, runs: [][2]int{{0, 2}}},
			{op: "acquire", hashes: []uint64{5, 6}, runs: [][2]int{{0, 2}}},
			{op: "release", hashes: []uint64{1, 2}},
			{op: "acquire", hashes: []uint64{9}, evicted: []uint64{2, 1}, runs: [][2]int{{0, 1}}},
		}},
		{"shared prefix extends with parent", 8, []step{
			{op: "acquire", hashes: []uint64{1, 2}, runs: [][2]int{{0, 2}}},
			{op: "acquire", hashes: []uint64{1, 2, 3, 4}, hit: 2, runs: [][2]int{{2, 4}}},
			{op: "release", hashes: []uint64{1, 2}},
			{op: "release", hashes: []uint64{1, 2, 3, 4}},
			{op: "clear", clearOK: true},
			{op: "acquire", hashes: []uint64{1}, runs: [][2]int{{0, 1}}},
			{op: "clear", clearOK: false},
		}},
		{"a hole in the middle splits the runs", 8, []step{
			{op: "acquire", hashes: []uint64{2}, runs: [][2]int{{0, 1}}},
			{op: "acquire", hashes: []uint64{1, 2, 3}, hit: 0, runs: [][2]int{{0, 1}, {2, 3}}},
		}},
		{"a repeated hash is stored once", 8, []step{
			{op: "acquire", hashes: []uint64{4, 5, 4, 6}, runs: [][2]int{{0, 2}, {3, 4}}},
			{op: "release", hashes: []uint64{4, 5, 4, 6}},
			{op: "clear", clearOK: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.cap)
			var res StoreResult
			for i, s := range tc.steps {
				switch s.op {
				case "acquire":
					hit := c.Prefix(s.hashes)
					if hit != s.hit {
						t.Fatalf("step %d: prefix = %d, want %d", i, hit, s.hit)
					}
					c.Pin(s.hashes[:hit])
					c.Store(s.hashes, hit, &res)
					if !slices.Equal(res.Evicted, s.evicted) {
						t.Fatalf("step %d: evicted %v, want %v", i, res.Evicted, s.evicted)
					}
					if !slices.Equal(res.Runs, s.runs) {
						t.Fatalf("step %d: runs %v, want %v", i, res.Runs, s.runs)
					}
				case "release":
					c.Release(s.hashes)
				case "clear":
					if got := c.Clear(); got != s.clearOK {
						t.Fatalf("step %d: clear = %v, want %v", i, got, s.clearOK)
					}
				}
				checkCacheInvariants(t, c)
			}
		})
	}
}

// checkCacheInvariants verifies the LRU list holds exactly the unpinned entries.
func checkCacheInvariants(t *testing.T, c *Cache) {
	t.Helper()
	onList := 0
	for e := c.head.next; e != &c.head; e = e.next {
		if e.refs != 0 {
			t.Fatalf("pinned block %d on the LRU list", e.hash)
		}
		if c.entries[e.hash] != e {
			t.Fatalf("LRU block %d not in entries", e.hash)
		}
		onList++
	}
	pinned := 0
	for _, e := range c.entries {
		if e.refs > 0 {
			pinned++
		}
	}
	if pinned != c.pinned || pinned+onList != len(c.entries) {
		t.Fatalf("pinned %d (counter %d) + lru %d != entries %d", pinned, c.pinned, onList, len(c.entries))
	}
}

// naiveCache is the obvious model of the cache: a map with reference counts and a
// last-released tick, evicting the unpinned block with the smallest tick.
type naiveCache struct {
	cap  int
	m    map[uint64]*naiveEntry
	tick int
}

type naiveEntry struct{ refs, last int }

func (n *naiveCache) prefix(hs []uint64) int {
	for i, h := range hs {
		if n.m[h] == nil {
			return i
		}
	}
	return len(hs)
}

func (n *naiveCache) store(hs []uint64, from int) (evicted []uint64, runs [][2]int) {
	need := 0
	for _, h := range hs[from:] {
		if e := n.m[h]; e != nil {
			e.refs++
		} else {
			need++
		}
	}
	for len(n.m)+need > n.cap {
		var victim uint64
		var best *naiveEntry
		for h, e := range n.m {
			if e.refs == 0 && (best == nil || e.last < best.last) {
				victim, best = h, e
			}
		}
		if best == nil {
			break
		}
		delete(n.m, victim)
		evicted = append(evicted, victim)
	}
	start := -1
	for i := from; i < len(hs); i++ {
		if n.m[hs[i]] != nil {
			if start >= 0 {
				runs = append(runs, [2]int{start, i})
				start = -1
			}
			continue
		}
		n.m[hs[i]] = &naiveEntry{refs: 1}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		runs = append(runs, [2]int{start, len(hs)})
	}
	return evicted, runs
}

func (n *naiveCache) release(hs []uint64) {
	for i := len(hs) - 1; i >= 0; i-- {
		if e := n.m[hs[i]]; e != nil && e.refs > 0 {
			e.refs--
			if e.refs == 0 {
				n.tick++
				e.last = n.tick
			}
		}
	}
}

// TestCacheMatchesNaiveModel runs seeded random request interleavings (prompts drawn from a
// small prefix tree, so they share and collide) through the cache and the naive model and
// requires identical hits, evictions, runs and contents at every step.
func TestCacheMatchesNaiveModel(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		capacity := 1 + rng.IntN(24)
		c := New(capacity)
		n := &naiveCache{cap: capacity, m: map[uint64]*naiveEntry{}}
		var res StoreResult
		var running [][]uint64
		for step := range 400 {
			if len(running) > 0 && (rng.IntN(2) == 0 || len(running) > 4) {
				i := rng.IntN(len(running))
				c.Release(running[i])
				n.release(running[i])
				running = append(running[:i], running[i+1:]...)
			} else {
				// A chain of 1..10 blocks in a 3-ary tree of depth 10: hash = path code.
				hs := make([]uint64, 1+rng.IntN(10))
				code := uint64(1)
				for j := range hs {
					code = code*4 + 1 + uint64(rng.IntN(3))
					hs[j] = code
				}
				hit, nhit := c.Prefix(hs), n.prefix(hs)
				if hit != nhit {
					t.Fatalf("seed %d step %d: prefix %d, naive %d", seed, step, hit, nhit)
				}
				c.Pin(hs[:hit])
				for _, h := range hs[:hit] {
					n.m[h].refs++
				}
				c.Store(hs, hit, &res)
				ev, runs := n.store(hs, hit)
				if !slices.Equal(res.Evicted, ev) || !slices.Equal(res.Runs, runs) {
					t.Fatalf("seed %d step %d: evicted %v runs %v, naive %v %v", seed, step, res.Evicted, res.Runs, ev, runs)
				}
				running = append(running, hs)
			}
			checkCacheInvariants(t, c)
			if len(c.entries) != len(n.m) {
				t.Fatalf("seed %d step %d: %d entries, naive %d", seed, step, len(c.entries), len(n.m))
			}
			for h, e := range n.m {
				if ce := c.entries[h]; ce == nil || ce.refs != e.refs {
					t.Fatalf("seed %d step %d: block %d differs from naive model", seed, step, h)
				}
			}
		}
	}
}
