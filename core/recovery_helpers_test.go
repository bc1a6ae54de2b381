package core

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
	"github.com/kvselect/kvselect/recovery"
)

// Fixtures of the recovery tests: services with KV events on (no listeners are started: events
// are applied directly), a seeded index generator, and a semantic view of a /dump.

// newKVService returns a Service with KV events on and a fixed seed.
func newKVService(t testing.TB, seed uint64) *Service {
	t.Helper()
	svc, err := New(Config{Engine: engine.DefaultConfig(), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// kvWorker is a schedulable worker with KV events on: dpSize ranks from 0, block size bs.
func kvWorker(id uint64, model string, bs, dpSize uint32) WorkerSpec {
	eps := map[string]string{}
	for r := uint32(0); r < dpSize; r++ {
		eps[fmt.Sprint(r)] = fmt.Sprintf("tcp://127.0.0.1:%d", 20000+int(id)*8+int(r))
	}
	return WorkerSpec{
		WorkerID: ptr(id), ModelName: ptr(model), Endpoint: ptr(fmt.Sprintf("http://w%d:8000", id)),
		BlockSize: ptr(bs), DataParallelSize: ptr(dpSize), KVEventsEndpoints: eps,
	}
}

// register upserts workers 1..n (two ranks each) in model with block size 4.
func register(t testing.TB, svc *Service, model string, n int) {
	t.Helper()
	for id := 1; id <= n; id++ {
		if _, err := svc.UpsertWorker(kvWorker(uint64(id), model, 4, 2)); err != nil {
			t.Fatal(err)
		}
	}
}

// indexShape describes a generated index: every (worker, rank) owner stores chains prompts,
// each a shared prefix (one of bases) followed by a tail unique to the chain.
type indexShape struct {
	workers, chains, prefixBlocks, tailBlocks, bases int
}

// prompt returns the tokens of chain c of owner (w, r) (block size 4).
func (sh indexShape) prompt(w uint64, r uint32, c int) []uint32 {
	toks := make([]uint32, 0, 4*(sh.prefixBlocks+sh.tailBlocks))
	base := uint32(c % sh.bases)
	for i := 0; i < 4*sh.prefixBlocks; i++ {
		toks = append(toks, base<<20|uint32(i))
	}
	for i := 0; i < 4*sh.tailBlocks; i++ {
		toks = append(toks, 1<<31|uint32(w)<<22|r<<20|uint32(c)<<10|uint32(i))
	}
	return toks
}

// seedIndex applies the shape's stored chains (device tier, some also in host_pinned) to svc,
// whose workers 1..shape.workers must be registered in model.
func seedIndex(t testing.TB, svc *Service, sh indexShape, rng *rand.Rand) (blocks int) {
	t.Helper()
	for w := 1; w <= sh.workers; w++ {
		for r := uint32(0); r < 2; r++ {
			o := kvwire.Owner{Worker: uint64(w), Rank: r}
			var evs []engine.KVEvent
			for c := 0; c < sh.chains; c++ {
				toks := sh.prompt(o.Worker, r, c)
				n := len(toks) / 4
				ext := make([]uint64, n)
				for i := range ext {
					ext[i] = o.Worker<<48 | uint64(r)<<40 | uint64(c)<<20 | uint64(i)
				}
				evs = append(evs, engine.KVEvent{Kind: engine.KVStored, BlockHashes: ext, TokenIDs: toks, BlockSize: 4})
				if rng.IntN(3) == 0 {
					evs = append(evs, engine.KVEvent{Kind: engine.KVStored, Tier: kvwire.Tier(1), BlockHashes: ext[:n/2], TokenIDs: toks[:4*(n/2)], BlockSize: 4})
				}
				if rng.IntN(4) == 0 {
					evs = append(evs, engine.KVEvent{Kind: engine.KVRemoved, BlockHashes: ext[n-1:]})
				}
			}
			st := svc.ApplyKVEvents(o, evs)
			if st.Dropped != 0 || st.SizeMismatches != 0 {
				t.Fatalf("seeding dropped events: %+v", st)
			}
			blocks += st.StoredBlocks
		}
	}
	return blocks
}

// dumpBytes returns svc's /dump.
func dumpBytes(t testing.TB, svc *Service) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := svc.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tuple is one dumped (partition, owner, tier, parent, block) fact, without event ids or order.
type tuple struct {
	part      recovery.Partition
	bs        uint32
	worker    uint64
	rank      uint32
	tier      kvwire.Tier
	hasParent bool
	parent    uint64
	ext, loc  uint64
}

// tupleSink collects a dump's stored blocks as tuples.
type tupleSink struct {
	cur    recovery.Partition
	buf    []tuple
	tuples []tuple
}

func (s *tupleSink) Begin(p recovery.Partition) error { s.cur, s.buf = p, s.buf[:0]; return nil }
func (s *tupleSink) Event(ev *recovery.RouterEvent) error {
	if ev.Kind != recovery.EventStored {
		return fmt.Errorf("a dump holds only stored events, got kind %d", ev.Kind)
	}
	parent, has := ev.Parent, ev.HasParent
	for _, b := range ev.Blocks {
		s.buf = append(s.buf, tuple{part: s.cur, worker: ev.WorkerID, rank: ev.DPRank, tier: ev.Tier, hasParent: has, parent: parent, ext: b.BlockHash, loc: b.TokensHash})
		parent, has = b.BlockHash, true
	}
	return nil
}
func (s *tupleSink) End(bs uint32) error {
	for i := range s.buf {
		s.buf[i].bs = bs
	}
	s.tuples = append(s.tuples, s.buf...)
	return nil
}
func (s *tupleSink) Abort(error) {}

// semantic parses a dump into its sorted tuples.
func semantic(t testing.TB, dump []byte) []tuple {
	t.Helper()
	s := &tupleSink{}
	st, err := recovery.ParseDump(bytes.NewReader(dump), s, recovery.Limits{})
	if err != nil || st.Rejected != 0 {
		t.Fatalf("own dump does not parse: %v (%+v)", err, st)
	}
	slices.SortFunc(s.tuples, func(a, b tuple) int {
		return cmp.Or(cmp.Compare(a.part.String(), b.part.String()), cmp.Compare(a.worker, b.worker), cmp.Compare(a.rank, b.rank),
			cmp.Compare(a.tier, b.tier), cmp.Compare(a.ext, b.ext), cmp.Compare(a.loc, b.loc), cmp.Compare(a.parent, b.parent))
	})
	return s.tuples
}

// overlaps returns the /overlap_scores answers of svc for the prompts.
func overlaps(t testing.TB, svc *Service, model string, prompts [][]uint32) []*OverlapScores {
	t.Helper()
	out := make([]*OverlapScores, 0, len(prompts))
	for _, p := range prompts {
		res, err := svc.OverlapScores(&PromptQuery{ModelName: ptr(model), Prompt: Prompt{TokenIDs: p}})
		if err != nil {
			t.Fatalf("OverlapScores: %v", err)
		}
		out = append(out, res)
	}
	return out
}
