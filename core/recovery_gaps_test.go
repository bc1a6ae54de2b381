package core

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// gapHistory generates KV event histories over a tiny prompt universe (paths of block labels),
// rich in removals from the middle of chains and in re-stores of the removed blocks.
type gapHistory struct {
	r       *rand.Rand
	workers int
	paths   [][]uint32 // label paths; prompts are their prefixes
}

func newGapHistory(seed uint64) *gapHistory {
	r := rand.New(rand.NewPCG(seed, 0x51ed))
	h := &gapHistory{r: r, workers: 1 + r.IntN(3)}
	labels := 2 + r.IntN(3)
	for range 3 + r.IntN(4) {
		p := make([]uint32, 2+r.IntN(6))
		for i := range p {
			p[i] = uint32(r.IntN(labels))
		}
		h.paths = append(h.paths, p)
	}
	return h
}

// tokens of the first n blocks of path p (block size 4).
func gapTokens(p []uint32, n int) []uint32 {
	out := make([]uint32, 0, 4*n)
	for i := range n {
		for j := range uint32(4) {
			out = append(out, p[i]*4+j)
		}
	}
	return out
}

// gapExt is the owner's external hash of block i of path p: a function of the owner and the
// block's content prefix, as an engine's hash is.
func gapExt(o kvwire.Owner, p []uint32, i int) uint64 {
	f := fnv.New64a()
	var b [4]byte
	for _, v := range []uint32{uint32(o.Worker), o.Rank} {
		b = [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
		f.Write(b[:])
	}
	for _, l := range p[:i+1] {
		f.Write([]byte{byte(l)})
	}
	return f.Sum64() >> 1
}

// step returns one owner's random batch: a store of a path prefix (from the root, or of a
// suffix under a held parent), or the removal of a random block (often a middle one).
func (h *gapHistory) step() (kvwire.Owner, []engine.KVEvent) {
	o := kvwire.Owner{Worker: uint64(1 + h.r.IntN(h.workers)), Rank: uint32(h.r.IntN(2))}
	p := h.paths[h.r.IntN(len(h.paths))]
	n := 1 + h.r.IntN(len(p))
	ext := func(from, to int) []uint64 {
		out := make([]uint64, 0, to-from)
		for i := from; i < to; i++ {
			out = append(out, gapExt(o, p, i))
		}
		return out
	}
	tier := kvwire.Tier(0)
	if h.r.IntN(4) == 0 {
		tier = kvwire.Tier(1)
	}
	switch op := h.r.IntN(10); {
	case op < 4:
		return o, []engine.KVEvent{{Kind: engine.KVStored, Tier: tier, BlockHashes: ext(0, n), TokenIDs: gapTokens(p, n), BlockSize: 4}}
	case op < 6 && n >= 2:
		k := 1 + h.r.IntN(n-1)
		toks := gapTokens(p, n)[4*k:]
		return o, []engine.KVEvent{{Kind: engine.KVStored, Tier: tier, Parent: gapExt(o, p, k-1), HasParent: true,
			BlockHashes: ext(k, n), TokenIDs: toks, BlockSize: 4}}
	default:
		i := h.r.IntN(n)
		return o, []engine.KVEvent{{Kind: engine.KVRemoved, Tier: tier, BlockHashes: ext(i, i+1)}}
	}
}

func (h *gapHistory) prompts() [][]uint32 {
	var out [][]uint32
	for _, p := range h.paths {
		for n := 1; n <= len(p); n++ {
			out = append(out, gapTokens(p, n))
		}
	}
	return out
}

// TestRecoveryKeepsBlocksBelowRemovedMiddleBlocks is the dump/recovery property of issue 14:
// for random store/remove histories, a replica recovered from A's /dump (over HTTP, through the
// real parser) answers every prompt as A does — right away, and after both receive the same
// further events. Re-storing a removed middle block brings its owner's blocks below it back
// into view in A's live index, so a dump that omitted them (as it did) left the recovered
// replica short of blocks A still matches.
func TestRecoveryKeepsBlocksBelowRemovedMiddleBlocks(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		h := newGapHistory(seed)
		src := newKVService(t, seed)
		register(t, src, "default", h.workers)
		for range 60 {
			o, evs := h.step()
			src.ApplyKVEvents(o, evs)
		}
		dst := newKVService(t, seed+1000)
		st := dst.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{dumpServer(t, src, nil).URL}})
		if st.State != "done" || st.Error != "" {
			t.Fatalf("seed %d: recovery %+v", seed, st)
		}
		register(t, dst, "default", h.workers)
		prompts := h.prompts()
		check := func(when string) {
			t.Helper()
			got, want := overlaps(t, dst, "default", prompts), overlaps(t, src, "default", prompts)
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("seed %d %s: prompt %v:\n recovered %+v\n    source %+v", seed, when, prompts[i], *got[i], *want[i])
				}
			}
		}
		check("after recovery")
		var diverged []string
		for range 60 {
			o, evs := h.step()
			a, b := src.ApplyKVEvents(o, evs), dst.ApplyKVEvents(o, evs)
			if a.StoredBlocks != b.StoredBlocks || a.RemovedBlocks != b.RemovedBlocks {
				diverged = append(diverged, fmt.Sprintf("source %+v, recovered %+v", a, b))
			}
		}
		check("after the same further events")
		if len(diverged) > 0 {
			t.Fatalf("seed %d: the same events did different things: %v", seed, diverged)
		}
	}
}
