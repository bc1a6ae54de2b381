package engine

// Fuzz targets for the engine's decoders of outside input. The HTTP layer decodes JSON into
// these request types; every field the engine reads is therefore attacker-chosen. FuzzSelect
// builds SelectRequest/prompt values from fuzz bytes and drives every prompt-taking operation;
// FuzzUpsertWorker does the same for catalog records. Invariants: nothing panics or hangs, and
// every error wraps one of the engine's sentinels.

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// fuzzBytes hands out decisions from fuzz input; once exhausted every read is zero.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *fuzzBytes) intn(n int) int { return int(f.byte()) % n }

func (f *fuzzBytes) u64() uint64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = f.byte()
	}
	return binary.LittleEndian.Uint64(buf[:])
}

// f64 returns an interesting float: small values, negatives, zero, one, NaN, ±Inf, or raw bits.
func (f *fuzzBytes) f64() *float64 {
	switch f.intn(9) {
	case 0:
		return nil
	case 1:
		return ptr(math.NaN())
	case 2:
		return ptr(math.Inf(1 - 2*f.intn(2)))
	case 3:
		return ptr(-float64(f.byte()) / 16)
	case 4:
		return ptr(math.Float64frombits(f.u64()))
	default:
		return ptr(float64(f.byte()) / 64)
	}
}

func (f *fuzzBytes) str(choices ...string) *string {
	i := f.intn(len(choices) + 1)
	if i == len(choices) {
		return nil
	}
	return ptr(choices[i])
}

// prompt builds a token or hash prompt, valid or not.
func (f *fuzzBytes) prompt() Prompt {
	// Half the inputs take the token path, half the precomputed-hash path; the hash path is
	// deliberately inconsistent (missing lists, length mismatches, isl 0 or huge) to reach every
	// validation branch, and hashes are arbitrary 64-bit values (negative on the wire).
	var p Prompt
	switch f.intn(4) {
	case 0, 1: // tokens, mostly from a shared range so some blocks match the index
		n := f.intn(80)
		base := uint32(f.intn(3)) * 8
		for i := 0; i < n; i++ {
			if f.intn(8) == 0 {
				p.TokenIDs = append(p.TokenIDs, uint32(f.u64()))
			} else {
				p.TokenIDs = append(p.TokenIDs, base+uint32(i))
			}
		}
		if f.intn(4) == 0 {
			p.MMRoutingInfo = &MMRoutingInfo{RoutingTokenIDs: p.TokenIDs[:f.intn(len(p.TokenIDs)+1)]}
			if f.intn(2) == 0 {
				p.MMRoutingInfo.BlockMMInfos = []*BlockExtraInfo{nil, {MMObjects: []MMObject{{MMHash: f.u64()}}}}
			}
		}
		if f.intn(4) == 0 {
			p.BlockMMInfos = []*BlockExtraInfo{{MMObjects: []MMObject{{MMHash: f.u64()}, {MMHash: f.u64()}}}, nil, {}}
		}
	default: // precomputed hashes with possibly inconsistent lengths
		if f.intn(6) != 0 {
			p.BlockHashes = make([]int64, f.intn(12))
			for i := range p.BlockHashes {
				p.BlockHashes[i] = int64(f.u64())
			}
		}
		if f.intn(6) != 0 {
			n := len(p.BlockHashes)
			if f.intn(4) == 0 {
				n = f.intn(12)
			}
			p.SequenceHashes = make([]int64, n)
			for i := range p.SequenceHashes {
				p.SequenceHashes[i] = int64(f.u64())
			}
		}
		if f.intn(6) != 0 {
			p.ISLTokens = ptr(uint64(f.intn(200)))
			if f.intn(16) == 0 {
				p.ISLTokens = ptr(f.u64())
			}
		}
	}
	p.LoraName = f.str("", "adapter-a")
	p.CacheSalt = f.str("", "tenant-a")
	if f.intn(4) == 0 {
		p.IsEagle = ptr(f.intn(2) == 0)
	}
	return p
}

func (f *fuzzBytes) override() *ConfigOverride {
	// One request in three carries an override; its floats include NaN, ±Inf and negatives,
	// which Validate must refuse before any weight reaches the cost function.
	if f.intn(3) != 0 {
		return nil
	}
	o := &ConfigOverride{OverlapScoreCredit: f.f64(), PrefillLoadScale: f.f64(), OverlapScoreWeight: f.f64(),
		RouterTemperature: f.f64(), SharedCacheMultiplier: f.f64()}
	if f.intn(2) == 0 {
		o.AssumeKVReuse = ptr(f.intn(2) == 0)
	}
	if f.intn(2) == 0 {
		o.TrackPrefillTokens = ptr(f.intn(2) == 0)
	}
	return o
}

func (f *fuzzBytes) selectRequest() *SelectRequest {
	r := &SelectRequest{
		ModelName:            f.str("default", "m2", "nope"),
		RoutingGroup:         f.str("default", "g"),
		SelectionID:          f.str("a", "b", "c"),
		Prompt:               f.prompt(),
		RouterConfigOverride: f.override(),
		Advisory:             f.intn(2) == 0,
	}
	if f.intn(3) == 0 {
		r.ExpectedOutputTokens = ptr(uint32(f.u64()))
	}
	// Targets name known and unknown workers and ranks, sometimes with required fields missing
	// (those are 422s); allowed ids and taint constraints can exclude every candidate.
	switch f.intn(6) {
	case 0:
		r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(f.intn(5))), DPRank: ptr(uint32(f.intn(4)))}
		if f.intn(4) == 0 {
			r.PinnedWorker.DPRank = nil
		}
	case 1:
		r.AffinityTarget = &AffinityTarget{WorkerID: ptr(uint64(f.intn(5)))}
		if f.intn(2) == 0 {
			r.AffinityTarget.DPRank = ptr(uint32(f.intn(4)))
		}
		if f.intn(4) == 0 {
			r.AffinityTarget.WorkerID = nil
		}
	}
	if f.intn(4) == 0 {
		r.AllowedWorkerIDs = []uint64{}
		for i := f.intn(4); i > 0; i-- {
			r.AllowedWorkerIDs = append(r.AllowedWorkerIDs, uint64(f.intn(5)))
		}
	}
	if f.intn(4) == 0 {
		r.RoutingConstraints = &RoutingConstraints{RequiredTaints: []string{"gpu-a", "x"}[:f.intn(3)],
			PreferredTaints: map[string]float32{"gpu-b": float32(int8(f.byte())) / 8}}
	}
	if f.intn(5) == 0 {
		r.SessionContext = &SessionContext{SessionID: f.str("s1"), InputTrigger: f.str("user_message", "bogus")}
	}
	return r
}

// fuzzEngine is a small fleet: worker 1 (ranks 0–1, taint gpu-a, hint source), worker 2 (rank 0,
// taint gpu-b, hint target), worker 3 in partition m2/g; some blocks indexed on several tiers.
func fuzzEngine(t testing.TB, cfg *Config) *Engine {
	e := newEngine(t, cfg)
	mustUpsert(t, e, spec(1, dp(0, 2), func(s *WorkerSpec) {
		s.Taints = []string{"gpu-a"}
		s.RouterHintWorkerType = ptr("decode")
		s.RouterHintSourceControlEndpoints = map[string]string{"0": "tcp://w1:5600", "1": "tcp://w1:5601"}
		s.TotalKVBlocks = ptr(uint64(64))
		s.MaxNumBatchedTokens = ptr(uint64(256))
	}))
	mustUpsert(t, e, spec(2, func(s *WorkerSpec) {
		s.Taints = []string{"gpu-b"}
		s.RouterHintWorkerType = ptr("decode")
		s.MaxNumBatchedTokens = ptr(uint64(256))
	}))
	mustUpsert(t, e, spec(3, inModel("m2", "g"), func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(256)) }))
	if cfg == nil || cfg.UseKVEvents {
		store(t, e, kvwire.Owner{Worker: 1}, toks(0, 32))
		storeTier(t, e, kvwire.Owner{Worker: 1}, TierOf("host_pinned"), toks(0, 32), toks(32, 16))
		store(t, e, kvwire.Owner{Worker: 1, Rank: 1}, toks(8, 16))
		store(t, e, kvwire.Owner{Worker: 3}, toks(0, 16))
	}
	return e
}

// mustSentinel fails on an error that wraps no sentinel.
func mustSentinel(t *testing.T, op string, err error) {
	if err != nil && sentinelName(err) == "" {
		t.Fatalf("%s: error %q (%T) wraps no sentinel", op, err, err)
	}
}

// FuzzSelect: random select requests against a small fleet never panic, and every error wraps
// a sentinel.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte("\x00\x00\x01\x00\x00\x20\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	f.Add([]byte("\x03\x02\x03\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\xff\xff\xff\xff"))
	f.Add([]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0\xef\xee\xed\xec\xeb\xea"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fb := &fuzzBytes{b: data}
		// The first byte picks the configuration: Dynamo defaults, approximate mode, or queueing
		// with busy thresholds, softmax and credit decay (the branches a default config skips).
		var cfg *Config
		switch fb.intn(4) {
		case 1:
			cfg = approxConfig()
		case 2:
			c := DefaultConfig()
			c.QueueThreshold, c.DecodeBusyThreshold, c.PrefillBusyThreshold = ptr(0.5), ptr(0.5), ptr(0.5)
			c.Temperature = 0.7
			c.OverlapScoreCreditDecay = 0.3
			cfg = &c
		}
		e := fuzzEngine(t, cfg)
		// Several rounds per input so later requests see state left by earlier ones (bookings,
		// pending selections, effects).
		for round := 0; round < 4 && (round == 0 || len(fb.b) > 0); round++ {
			req := fb.selectRequest()
			resp, err := e.Select(req, t0)
			mustSentinel(t, "Select", err)
			if err == nil && (resp.Overlap.GPU > resp.Overlap.CPU || resp.Overlap.CPU > resp.Overlap.Disk || resp.Booked != nil) {
				t.Fatalf("Select response %+v", resp)
			}
			// Same request as a booking: a success always carries the booked inputs and an id.
			resp, err = e.SelectAndReserve(req, t0)
			mustSentinel(t, "SelectAndReserve", err)
			if err == nil && (resp.Booked == nil || resp.SelectionID == nil) {
				t.Fatalf("SelectAndReserve response without booking %+v", resp)
			}
			q := &PromptQuery{ModelName: req.ModelName, RoutingGroup: req.RoutingGroup, Prompt: req.Prompt, RouterConfigOverride: req.RouterConfigOverride}
			_, err = e.PotentialLoads(q)
			mustSentinel(t, "PotentialLoads", err)
			_, err = e.OverlapScores(q)
			mustSentinel(t, "OverlapScores", err)
			// The prompt again as a reservation, in the replay or (half the time) explicit form.
			rr := &ReservationRequest{ModelName: req.ModelName, RoutingGroup: req.RoutingGroup, SelectionID: req.SelectionID,
				Prompt: req.Prompt, RouterConfigOverride: req.RouterConfigOverride}
			if fb.intn(2) == 0 {
				rr.WorkerID, rr.DPRank = ptr(uint64(fb.intn(4))), ptr(uint32(fb.intn(3)))
				if fb.intn(2) == 0 {
					rr.EffectivePrefillTokens = ptr(uint64(fb.intn(100)))
				}
				if fb.intn(2) == 0 {
					rr.TrackPrefillTokens = ptr(fb.intn(2) == 0)
				}
			}
			_, err = e.Reserve(rr, t0)
			mustSentinel(t, "Reserve", err)
			// Lifecycle calls on whatever the id now names (booked, pending or unknown).
			id := deref(req.SelectionID, "a")
			mustSentinel(t, "OutputBlock", e.OutputBlock(id, fb.f64()))
			mustSentinel(t, "PrefillComplete", e.PrefillComplete(id))
			if fb.intn(2) == 0 {
				mustSentinel(t, "Free", e.Free(id))
			}
			for _, ev := range e.TakeEffects(nil) {
				if ev.Kind == LifecycleAdd && ev.Add == nil {
					t.Fatalf("admission without body")
				}
			}
		}
		// A far-future sweep frees everything; it must cope with any state the rounds left.
		e.Sweep(t0.Add(1e12))
	})
}

// FuzzUpsertWorker: arbitrary catalog records (ranks near u32 limits, odd endpoints, enum
// strings) never panic or hang, errors wrap a sentinel, and a record is schedulable iff it has
// no reasons.
func FuzzUpsertWorker(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 4, 0, 2, 1, 1, 1})
	f.Add([]byte("\x02\xff\xff\xff\xff\xff\x01\x01\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fb := &fuzzBytes{b: data}
		e := newEngine(t, []*Config{nil, approxConfig()}[fb.intn(2)])
		mustUpsert(t, e, spec(9))
		// Worker 9 keeps the default partition alive, so re-registrations of 1–3 exercise
		// partition joins, shape mismatches and moves, not only creation.
		for round := 0; round < 3; round++ {
			id := uint64(1 + fb.intn(3))
			s := WorkerSpec{WorkerID: ptr(id), ModelName: fb.str("default", "m2"), Endpoint: fb.str("", "http://w")}
			if fb.intn(4) != 0 {
				s.BlockSize = ptr(uint32(fb.intn(3)) * 4)
			}
			// Start ranks near the top of u32 exercise the wrap-around guard.
			switch fb.intn(4) {
			case 0:
				s.DataParallelStartRank = ptr(uint32(fb.u64()))
			case 1:
				s.DataParallelStartRank = ptr(uint32(math.MaxUint32 - fb.intn(4)))
			}
			if fb.intn(2) == 0 {
				s.DataParallelSize = ptr(uint32(fb.intn(4)))
			}
			if fb.intn(2) == 0 {
				s.KVEventsEndpoint = fb.str("tcp://w:1", "tcp://w", "ipc://x", "")
			}
			if fb.intn(3) == 0 {
				s.KVEventsEndpoints = map[string]string{}
				for i := fb.intn(4); i > 0; i-- {
					key := deref(fb.str("0", "1", "2", "4294967295", "x", "-1"), "3")
					s.KVEventsEndpoints[key] = deref(fb.str("tcp://w:2", "tcp://[::1:3", "bogus"), "")
				}
			}
			s.ReplayEndpoint = fb.str("tcp://w:9", "tcp://w:99999")
			s.KVTransferEnforcement = fb.str("required", "bogus")
			s.KVEventSourceMode = fb.str("state_agent_v2", "bogus")
			if fb.intn(2) == 0 {
				s.IsEagle = ptr(fb.intn(2) == 0)
			}
			rec, err := e.UpsertWorker(s)
			mustSentinel(t, "UpsertWorker", err)
			if err == nil && (rec.Lifecycle == LifecycleSchedulable) != (len(rec.NotSchedulableReasons) == 0) {
				t.Fatalf("lifecycle %s with reasons %q", rec.Lifecycle, rec.NotSchedulableReasons)
			}
			if fb.intn(3) == 0 {
				_, err = e.PatchWorker(id, WorkerPatch{DataParallelSize: ptr(uint32(fb.intn(3)))})
				mustSentinel(t, "PatchWorker", err)
			}
			// Book something so later upserts must reconcile live bookings.
			_, err = e.SelectAndReserve(&SelectRequest{Prompt: tokenPrompt(toks(0, 16))}, t0)
			mustSentinel(t, "SelectAndReserve", err)
			e.EventSources(id)
			if fb.intn(4) == 0 {
				_, err = e.DeleteWorker(id)
				mustSentinel(t, "DeleteWorker", err)
			}
		}
		checkRows(t, e)
	})
}

// checkRows asserts that reservation rows and tracker bookings agree.
func checkRows(t *testing.T, e *Engine) {
	live := 0
	for _, p := range e.parts {
		live += p.tracker.Len()
	}
	if live != len(e.resv) {
		t.Fatalf("%d bookings, %d reservation rows", live, len(e.resv))
	}
}
