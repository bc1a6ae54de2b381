package radix

import (
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// workload is a synthetic fleet history shaped like production chat traffic: a few system
// prompts with Zipf popularity, each the root of many conversations; every conversation is
// served by one or two owners (sticky routing with occasional migration) that store its blocks
// turn by turn under the previous turn's last block (parent hash), and some owners also offload
// conversations to host memory. Popular system prompts end up held by most of the 512 owners,
// conversation tails by one or two.
type workload struct {
	owners  []kvwire.Owner
	events  []storeEvent // in arrival order
	queries [][]uint64   // next-turn prompts, 64 blocks each, rooted in stored conversations
	entries int          // (block, owner) entries after replaying events
}

type storeEvent struct {
	o         kvwire.Owner
	tier      kvwire.Tier
	parent    uint64
	hasParent bool
	blocks    []StoredBlock
}

type wlConfig struct {
	workers, ranks int
	systemPrompts  int
	conversations  int
	queryLen       int
	seed           uint64
}

var defaultWL = wlConfig{workers: 64, ranks: 8, systemPrompts: 48, conversations: 18000, queryLen: 64, seed: 1}

// extHash derives an engine-style external hash: a rolling hash of the path, like vLLM's chained
// block hashes (identical content → identical hash on every worker).
func extHash(parent, local uint64) uint64 {
	x := parent*0x9E3779B97F4A7C15 ^ local
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x | 1
}

func genWorkload(c wlConfig) *workload {
	r := rand.New(rand.NewPCG(c.seed, 42))
	w := &workload{}
	for wk := range c.workers {
		for rk := range c.ranks {
			w.owners = append(w.owners, kvwire.Owner{Worker: uint64(1000 + wk), Rank: uint32(wk*c.ranks + rk)})
		}
	}
	type sys struct {
		local, ext []uint64
		heldBy     map[kvwire.Owner]bool
	}
	prompts := make([]sys, c.systemPrompts)
	for i := range prompts {
		n := 8 + r.IntN(17)
		p := sys{heldBy: map[kvwire.Owner]bool{}}
		prev := uint64(0)
		for range n {
			l := r.Uint64()
			prev = extHash(prev, l)
			p.local, p.ext = append(p.local, l), append(p.ext, prev)
		}
		prompts[i] = p
	}
	zipf := rand.NewZipf(r, 1.1, 2, uint64(c.systemPrompts-1))
	seen := map[[2]uint64]bool{} // (owner index, ext) stored in any tier
	for range c.conversations {
		sp := &prompts[zipf.Uint64()]
		nOwners := 1
		if r.IntN(3) == 0 {
			nOwners = 2
		}
		var servers []kvwire.Owner
		for range nOwners {
			servers = append(servers, w.owners[r.IntN(len(w.owners))])
		}
		offload := r.IntN(5) == 0
		local, ext := append([]uint64(nil), sp.local...), append([]uint64(nil), sp.ext...)
		turns := 2 + r.IntN(5)
		for t := range turns {
			o := servers[t%len(servers)]
			if !sp.heldBy[o] {
				sp.heldBy[o] = true
				w.events = append(w.events, storeEvent{o: o, tier: kvwire.TierDevice, blocks: blocksOf(sp.local, sp.ext)})
			}
			// The turn's new blocks: the previous turn's answer plus the new question.
			start := len(local)
			n := 4 + r.IntN(13)
			for range n {
				l := r.Uint64()
				local = append(local, l)
				ext = append(ext, extHash(ext[len(ext)-1], l))
			}
			// The serving owner stores whatever part of the conversation it does not hold yet
			// (the whole history when the conversation migrated to it).
			from := start
			for from > len(sp.local) && !seen[[2]uint64{uint64(ownerKey(o)), ext[from-1]}] {
				from--
			}
			ev := storeEvent{o: o, tier: kvwire.TierDevice, parent: ext[from-1], hasParent: true,
				blocks: blocksOf(local[from:], ext[from:])}
			w.events = append(w.events, ev)
			if offload {
				w.events = append(w.events, storeEvent{o: o, tier: kvwire.TierHostPinned, parent: ev.parent,
					hasParent: true, blocks: ev.blocks})
			}
			for _, b := range ev.blocks {
				seen[[2]uint64{uint64(ownerKey(o)), b.External}] = true
			}
		}
		// The next turn's prompt: the history plus new tokens, cut or padded to queryLen.
		q := append([]uint64(nil), local...)
		for len(q) < c.queryLen {
			q = append(q, r.Uint64())
		}
		w.queries = append(w.queries, q[:c.queryLen])
	}
	r.Shuffle(len(w.queries), func(i, j int) { w.queries[i], w.queries[j] = w.queries[j], w.queries[i] })
	return w
}

func ownerKey(o kvwire.Owner) uint64 { return o.Worker<<32 | uint64(o.Rank) }

func blocksOf(local, ext []uint64) []StoredBlock {
	b := make([]StoredBlock, len(local))
	for i := range b {
		b[i] = StoredBlock{External: ext[i], Local: local[i]}
	}
	return b
}

// build replays the workload's events into a fresh index.
func (w *workload) build(t testing.TB) *Index {
	ix := New()
	for _, ev := range w.events {
		if err := ix.Store(ev.o, ev.tier, ev.parent, ev.hasParent, ev.blocks); err != nil {
			t.Fatalf("workload store: %v", err)
		}
	}
	w.entries = ix.Stats().Entries
	return ix
}

// TestWorkloadAgainstReference replays a small version of the benchmark workload into both the
// index and the reference and compares matches on its queries.
func TestWorkloadAgainstReference(t *testing.T) {
	c := defaultWL
	c.workers, c.ranks, c.conversations, c.queryLen = 8, 2, 150, 40
	w := genWorkload(c)
	ix, ref := w.build(t), newRef()
	for _, ev := range w.events {
		if err := ref.Store(ev.o, ev.tier, ev.parent, ev.hasParent, ev.blocks); err != nil {
			t.Fatal(err)
		}
	}
	compareWithRef(t, ix, ref, w.queries[:25], w.owners[:4])
}
