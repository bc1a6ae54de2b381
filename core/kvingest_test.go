package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// Unit and property tests of the KV-ingestion glue in kvingest.go: wire events → engine events
// (translate), one rank's Apply path (decode, rank attribution, counters), the restart hook, and
// a property test of the whole bytes-to-index path against a naive model of what each rank
// holds. Listeners are not started here (no sockets): rankListener values are built directly and
// fed the bytes a listener would hand them. Socket-level behaviour is covered by
// kvingest_reconcile_test.go and the integration tests.

// ingestBS is the block size of every worker in these tests.
const ingestBS = 16

// ingestService returns a service with KV events on (listeners never started).
func ingestService(t testing.TB) *Service {
	t.Helper()
	svc, err := New(Config{Engine: engine.DefaultConfig(), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// ingestSpec is a schedulable worker spec with dpSize ranks from 0; its endpoints are never
// dialled unless the test enables KV events.
func ingestSpec(id uint64, model string, dpSize uint32, eps ...string) WorkerSpec {
	bs, url := uint32(ingestBS), fmt.Sprintf("http://w%d:8000", id)
	m := map[string]string{}
	for r := uint32(0); r < dpSize; r++ {
		ep := fmt.Sprintf("tcp://127.0.0.1:%d", 30000+int(id)*8+int(r))
		if int(r) < len(eps) {
			ep = eps[r]
		}
		m[fmt.Sprint(r)] = ep
	}
	return WorkerSpec{WorkerID: &id, ModelName: &model, Endpoint: &url, BlockSize: &bs, DataParallelSize: &dpSize, KVEventsEndpoints: m}
}

// ingestRegister upserts a worker and fails unless it is schedulable.
func ingestRegister(t testing.TB, svc *Service, spec WorkerSpec) {
	t.Helper()
	rec, err := svc.UpsertWorker(spec)
	if err != nil || rec.Lifecycle != engine.LifecycleSchedulable {
		t.Fatalf("register %d: %+v %v", *spec.WorkerID, rec, err)
	}
}

// ingestRank is the handler a listener of (id, rank) would get, without the listener. Calling
// its Apply from the test goroutine stands in for the listener's handler goroutine: the
// handler's decoder and scratch slices are then used by one goroutine only, as in production.
func ingestRank(svc *Service, id uint64, rank uint32) *rankListener {
	return &rankListener{src: engine.EventSource{Owner: Owner{Worker: id, Rank: rank}}, dec: kvevents.NewDecoder(), svc: svc}
}

// own names a (worker, rank) owner.
func own(w uint64, r uint32) Owner { return Owner{Worker: w, Rank: r} }

// ingestOverlap returns device blocks per owner for a prompt.
func ingestOverlap(t testing.TB, svc *Service, model string, tokens []uint32) map[Owner]uint64 {
	t.Helper()
	os, err := svc.OverlapScores(&PromptQuery{ModelName: &model, Prompt: Prompt{TokenIDs: tokens}})
	if err != nil {
		t.Fatal(err)
	}
	m := map[Owner]uint64{}
	for _, r := range os.Workers {
		m[Owner{Worker: r.WorkerID, Rank: r.DPRank}] = r.DeviceBlocks
	}
	return m
}

// ingestTokens returns n blocks of distinct tokens for prompt p.
func ingestTokens(p, n int) []uint32 {
	out := make([]uint32, n*ingestBS)
	for i := range out {
		out[i] = uint32(p*1_000_000 + i + 1)
	}
	return out
}

// ingestStored is a BlockStored of blocks [from, from+n) of prompt p, with engine hashes
// hash(p, i), chained to block from-1.
func ingestStored(p, from, n int) kvevents.Event {
	toks := ingestTokens(p, from+n)
	ev := kvevents.Event{Kind: kvevents.KindBlockStored, TokenIDs: toks[from*ingestBS:], BlockSize: ingestBS}
	for i := from; i < from+n; i++ {
		ev.BlockHashes = append(ev.BlockHashes, ingestHash(p, i))
	}
	if from > 0 {
		ev.Parent, ev.HasParent = ingestHash(p, from-1), true
	}
	return ev
}

// ingestHash is the engine hash of block i of prompt p (above 2^63, like vLLM's, so the
// encoder writes msgpack uint64 and the decoder's unsigned path is exercised). Distinct per
// (p, i), so a removal names exactly one block.
func ingestHash(p, i int) uint64 { return 1<<63 | uint64(p)<<24 | uint64(i) }

// ingestBatch encodes events as a vLLM batch (dpRank < 0: data_parallel_rank nil).
func ingestBatch(dpRank int, evs ...kvevents.Event) []byte {
	b := kvevents.Batch{TS: 1.7e9, Events: evs}
	if dpRank >= 0 {
		b.DPRank, b.HasDPRank = int32(dpRank), true
	}
	return kvevents.AppendBatch(nil, &b)
}

// TestTranslate pins the wire → engine mapping per event shape. Rows: each kind; the medium
// becomes the tier; hybrid-model filter rows (Dynamo indexes only main-attention groups) are
// dropped; an unknown kind is dropped rather than applied as something else.
func TestTranslate(t *testing.T) {
	stored := kvevents.Event{
		Kind: kvevents.KindBlockStored, BlockHashes: []uint64{7, 8}, Parent: 6, HasParent: true,
		TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: kvwire.TierHostPinned,
		LoraName: "ad", CacheSalt: "salt", MMHashes: [][]uint64{{9}, nil},
	}
	eagle := kvevents.Event{Kind: kvevents.KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3}, BlockSize: 2, Eagle: true}
	withGroup := func(e kvevents.Event, g int64) kvevents.Event { e.GroupIdx, e.HasGroupIdx = g, true; return e }
	withKind := func(e kvevents.Event, k string) kvevents.Event { e.SpecKind = k; return e }
	cases := []struct {
		name string
		in   kvevents.Event
		want []engine.KVEvent
	}{
		{"stored keeps every indexing field", stored, []engine.KVEvent{{
			Kind: engine.KVStored, Tier: kvwire.TierHostPinned, BlockHashes: []uint64{7, 8},
			Parent: 6, HasParent: true, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2,
			LoraName: "ad", CacheSalt: "salt", MMHashes: [][]uint64{{9}, nil},
		}}},
		{"stored eagle", eagle, []engine.KVEvent{{Kind: engine.KVStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3}, BlockSize: 2, Eagle: true}}},
		{"removed on disk", kvevents.Event{Kind: kvevents.KindBlockRemoved, BlockHashes: []uint64{5}, Medium: kvwire.TierDisk},
			[]engine.KVEvent{{Kind: engine.KVRemoved, Tier: kvwire.TierDisk, BlockHashes: []uint64{5}}}},
		{"cleared", kvevents.Event{Kind: kvevents.KindAllBlocksCleared}, []engine.KVEvent{{Kind: engine.KVCleared}}},
		{"group 0 is indexed", withGroup(eagle, 0), []engine.KVEvent{{Kind: engine.KVStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3}, BlockSize: 2, Eagle: true}}},
		{"group 1 is ignored", withGroup(stored, 1), nil},
		{"sliding window ignored", withKind(stored, "sliding_window"), nil},
		{"mla kind overrides group", withKind(withGroup(eagle, 3), "mla_attention"), []engine.KVEvent{{Kind: engine.KVStored, BlockHashes: []uint64{1}, TokenIDs: []uint32{1, 2, 3}, BlockSize: 2, Eagle: true}}},
		{"removed of a mamba group ignored", withKind(kvevents.Event{Kind: kvevents.KindBlockRemoved, BlockHashes: []uint64{5}}, "mamba"), nil},
		{"invalid kind dropped", kvevents.Event{Kind: kvevents.KindInvalid, BlockHashes: []uint64{5}}, nil},
	}
	// Each row translates one event alone, so a row's result cannot depend on its neighbours.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(nil, []kvevents.Event{tc.in})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("translate = %+v\nwant        %+v", got, tc.want)
			}
		})
	}
	// The result is appended to dst and keeps earlier entries.
	dst := translate([]engine.KVEvent{{Kind: engine.KVCleared}}, []kvevents.Event{stored, withGroup(stored, 2), {Kind: kvevents.KindAllBlocksCleared}})
	if len(dst) != 3 || dst[0].Kind != engine.KVCleared || dst[1].Kind != engine.KVStored || dst[2].Kind != engine.KVCleared {
		t.Fatalf("append semantics: %+v", dst)
	}
}

// TestRankListenerApply drives the handler with encoded batches. Rows cover rank attribution
// (data_parallel_rank overrides the listener's rank, nil keeps it, a rank outside the worker is
// dropped by the engine) and an undecodable payload (error returned so the watermark stays;
// counted; index untouched).
func TestRankListenerApply(t *testing.T) {
	prompt := ingestTokens(1, 2)
	cases := []struct {
		name      string
		listener  uint32
		payload   []byte
		wantErr   bool
		want      map[Owner]uint64
		wantStats Stats // only KV, KVBatches and KVUndecodable are compared
	}{
		{"nil rank: listener's rank", 1, ingestBatch(-1, ingestStored(1, 0, 2)), false,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 2}, Stats{KV: engine.KVApplyStats{StoredBlocks: 2}, KVBatches: 1}},
		{"batch rank overrides", 0, ingestBatch(1, ingestStored(1, 0, 2)), false,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 2}, Stats{KV: engine.KVApplyStats{StoredBlocks: 2}, KVBatches: 1}},
		{"batch rank equals listener's", 0, ingestBatch(0, ingestStored(1, 0, 1)), false,
			map[Owner]uint64{own(1, 0): 1, own(1, 1): 0}, Stats{KV: engine.KVApplyStats{StoredBlocks: 1}, KVBatches: 1}},
		{"rank outside the worker", 0, ingestBatch(5, ingestStored(1, 0, 2)), false,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 0}, Stats{KV: engine.KVApplyStats{Dropped: 1}, KVBatches: 1}},
		{"block size mismatch", 0, ingestBatch(0, func() kvevents.Event { e := ingestStored(1, 0, 2); e.BlockSize = 8; return e }()), false,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 0}, Stats{KV: engine.KVApplyStats{SizeMismatches: 2}, KVBatches: 1}},
		{"undecodable", 0, []byte("p17"), true,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 0}, Stats{KVUndecodable: 1}},
		{"truncated batch", 0, ingestBatch(0, ingestStored(1, 0, 2))[:40], true,
			map[Owner]uint64{own(1, 0): 0, own(1, 1): 0}, Stats{KVUndecodable: 1}},
	}
	// Every row gets a fresh service, so the compared counters are exactly that batch's.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := ingestService(t)
			ingestRegister(t, svc, ingestSpec(1, "m", 2))
			err := ingestRank(svc, 1, tc.listener).Apply(0, tc.payload, false)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Apply error = %v, want error %t", err, tc.wantErr)
			}
			if got := ingestOverlap(t, svc, "m", prompt); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("overlap %v, want %v", got, tc.want)
			}
			st := svc.Stats()
			got := Stats{KV: st.KV, KVBatches: st.KVBatches, KVUndecodable: st.KVUndecodable}
			if !reflect.DeepEqual(got, tc.wantStats) {
				t.Fatalf("stats %+v, want %+v", got, tc.wantStats)
			}
		})
	}
}

// TestRankListenerRestarted checks the restart hook: the restarted rank loses every block, the
// worker's other rank and other workers keep theirs, and blocks stored afterwards apply.
func TestRankListenerRestarted(t *testing.T) {
	svc := ingestService(t)
	ingestRegister(t, svc, ingestSpec(1, "m", 2))
	ingestRegister(t, svc, ingestSpec(2, "m", 1))
	prompt := ingestTokens(1, 3)
	ranks := []*rankListener{ingestRank(svc, 1, 0), ingestRank(svc, 1, 1), ingestRank(svc, 2, 0)}
	for _, rl := range ranks {
		if err := rl.Apply(0, ingestBatch(-1, ingestStored(1, 0, 3)), false); err != nil {
			t.Fatal(err)
		}
	}
	// Rank 0 of worker 1 restarted (its old incarnation had reached seq 41, the new one
	// starts at 0): only that rank's ownership may go.
	ranks[0].Restarted(41, 0)
	want := map[Owner]uint64{own(1, 0): 0, own(1, 1): 3, own(2, 0): 3}
	if got := ingestOverlap(t, svc, "m", prompt); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart of 1/0: %v, want %v", got, want)
	}
	if err := ranks[0].Apply(0, ingestBatch(-1, ingestStored(1, 0, 1)), false); err != nil {
		t.Fatal(err)
	}
	want[own(1, 0)] = 1
	if got := ingestOverlap(t, svc, "m", prompt); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the new incarnation's first batch: %v, want %v", got, want)
	}
}

// ingestModel is the naive reference of the property test: per owner, per prompt, which blocks
// the engine holds. Expected overlap is the length of the leading run of held blocks, which is
// what a prefix index must report for prompts that share no content.
type ingestModel map[Owner]map[int][]bool

func (m ingestModel) held(o Owner, p, blocks int) []bool {
	if m[o] == nil {
		m[o] = map[int][]bool{}
	}
	if m[o][p] == nil {
		m[o][p] = make([]bool, blocks)
	}
	return m[o][p]
}

// TestKVIngestMatchesNaiveModel is a property test of the bytes-to-index path: random batches
// of BlockStored (chained to a random earlier block, which the owner may or may not hold),
// BlockRemoved of random blocks and AllBlocksCleared, attributed through a random
// data_parallel_rank or the listener's own rank, are encoded with kvevents.AppendBatch and fed
// to rankListener.Apply. After every batch the overlap of every (prompt, owner) must equal the
// model's. The model mirrors two engine rules: a chain whose parent the owner does not hold is
// dropped whole, and removing a middle block cuts the owner's prefix there.
func TestKVIngestMatchesNaiveModel(t *testing.T) {
	const prompts, blocks = 4, 6
	owners := []Owner{own(1, 0), own(1, 1), own(2, 0)}
	for seed := uint64(1); seed <= 200; seed++ {
		svc := ingestService(t)
		ingestRegister(t, svc, ingestSpec(1, "m", 2))
		ingestRegister(t, svc, ingestSpec(2, "m", 1))
		rls := map[Owner]*rankListener{}
		for _, o := range owners {
			rls[o] = ingestRank(svc, o.Worker, o.Rank)
		}
		model := ingestModel{}
		rng := rand.New(rand.NewPCG(seed, 99))
		// Each step is one batch of 1–3 events sent through one listener (via); with a
		// data_parallel_rank the batch's blocks belong to target instead, which is how
		// vLLM's DP ranks label their batches.
		for step := 0; step < 60; step++ {
			via := owners[rng.IntN(len(owners))]
			target, dp := via, -1
			if via.Worker == 1 && rng.IntN(2) == 0 { // attribute through data_parallel_rank
				target.Rank = uint32(rng.IntN(2))
				dp = int(target.Rank)
			}
			var evs []kvevents.Event
			for range 1 + rng.IntN(3) {
				p := rng.IntN(prompts)
				held := model.held(target, p, blocks)
				switch k := rng.IntN(10); {
				case k < 6:
					// A chain starting mid-prompt is accepted only if the owner holds its
					// parent; otherwise the engine drops it whole (parent not found).
					from := rng.IntN(blocks)
					n := 1 + rng.IntN(blocks-from)
					evs = append(evs, ingestStored(p, from, n))
					if from == 0 || held[from-1] {
						for i := from; i < from+n; i++ {
							held[i] = true
						}
					}
				case k < 9:
					ev := kvevents.Event{Kind: kvevents.KindBlockRemoved}
					for i := range blocks {
						if rng.IntN(3) == 0 {
							ev.BlockHashes = append(ev.BlockHashes, ingestHash(p, i))
							held[i] = false
						}
					}
					evs = append(evs, ev)
				default:
					evs = append(evs, kvevents.Event{Kind: kvevents.KindAllBlocksCleared})
					delete(model, target)
				}
			}
			if err := rls[via].Apply(uint64(step), ingestBatch(dp, evs...), false); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			// Check every (prompt, owner) pair, not only the ones touched, so that a batch
			// leaking into another owner or prompt is caught at the step that caused it.
			for p := range prompts {
				got := ingestOverlap(t, svc, "m", ingestTokens(p, blocks))
				for _, o := range owners {
					want := 0
					for _, h := range model.held(o, p, blocks) {
						if !h {
							break
						}
						want++
					}
					if got[o] != uint64(want) {
						t.Fatalf("seed %d step %d prompt %d owner %v: overlap %d, model %d (held %v)",
							seed, step, p, o, got[o], want, model.held(o, p, blocks))
					}
				}
			}
		}
	}
}

// FuzzRankListenerApply feeds arbitrary bytes (the outside input of a listener) to the Apply
// path. It must never panic; when it reports an error nothing may change (the batch is
// undecodable, so the index and the applied-batch counter stay as they were), and when it
// succeeds the batch counter moves by one.
func FuzzRankListenerApply(f *testing.F) {
	f.Add(ingestBatch(0, ingestStored(1, 0, 2)))
	f.Add(ingestBatch(-1, ingestStored(1, 1, 1), kvevents.Event{Kind: kvevents.KindBlockRemoved, BlockHashes: []uint64{ingestHash(1, 0)}}))
	f.Add(ingestBatch(1, kvevents.Event{Kind: kvevents.KindAllBlocksCleared}))
	f.Add([]byte{0x93, 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0, 0, 0x90, 0x00}) // empty batch
	f.Add([]byte("p17"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		svc := ingestService(t)
		ingestRegister(t, svc, ingestSpec(1, "m", 2))
		rl := ingestRank(svc, 1, 0)
		// Seed the index so that a spurious change is visible.
		if err := rl.Apply(0, ingestBatch(0, ingestStored(1, 0, 2)), false); err != nil {
			t.Fatal(err)
		}
		before := ingestOverlap(t, svc, "m", ingestTokens(1, 2))
		n := svc.Stats().KVBatches
		err := rl.Apply(1, payload, false)
		st := svc.Stats()
		if err != nil {
			if !errors.Is(err, kvevents.ErrMalformed) && !errors.Is(err, kvevents.ErrTooDeep) && !errors.Is(err, kvevents.ErrTooLong) {
				t.Fatalf("Apply error %v wraps none of the decoder's sentinels", err)
			}
			if st.KVBatches != n || st.KVUndecodable != 1 {
				t.Fatalf("failed Apply changed counters: %+v", st)
			}
			if got := ingestOverlap(t, svc, "m", ingestTokens(1, 2)); !reflect.DeepEqual(got, before) {
				t.Fatalf("failed Apply changed the index: %v → %v", before, got)
			}
			return
		}
		if st.KVBatches != n+1 {
			t.Fatalf("successful Apply counted %d batches, want %d", st.KVBatches, n+1)
		}
	})
}
