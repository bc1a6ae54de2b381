package engine

// Shared fixtures of the engine's tests: engines with a seeded random source, worker specs,
// prompts, KV-event builders and error assertions.
//
// Conventions (all tests follow them):
//   - time is explicit: tests start at t0 and step it themselves; nothing reads the wall clock;
//   - randomness comes from rand.NewPCG with fixed seeds, so every failure reproduces;
//   - the default partition uses block size 4 so prompts stay short and readable;
//   - KV events carry external hashes derived from the owner and the public chain, so two
//     owners holding the same content use different external hashes (as two engines would).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine/kvhash"
	"github.com/kvselect/kvselect/kvwire"
)

// t0 is the fixed start of every test clock.
var t0 = time.Unix(1_700_000_000, 0)

// sentinels lists every sentinel an engine error may wrap.
var sentinels = []error{ErrBadRequest, ErrUnprocessable, ErrNotFound, ErrConflict, ErrNotReady, ErrNoEndpoints, ErrOverloaded, ErrInternal}

// sentinelName names the sentinel err wraps ("" when none).
func sentinelName(err error) string {
	names := []string{"bad_request", "unprocessable", "not_found", "conflict", "not_ready", "no_endpoints", "overloaded", "internal"}
	for i, s := range sentinels {
		if errors.Is(err, s) {
			return names[i]
		}
	}
	return ""
}

// newEngine returns an engine with cfg (nil = defaults) and a fixed-seed random source.
func newEngine(t testing.TB, cfg *Config) *Engine {
	t.Helper()
	c := DefaultConfig()
	if cfg != nil {
		c = *cfg
	}
	e, err := New(c, Options{Rand: rand.New(rand.NewPCG(7, 11))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// approxConfig is the default configuration with KV events off (approximate index).
func approxConfig() *Config {
	c := DefaultConfig()
	c.UseKVEvents = false
	return &c
}

// spec returns a complete single-rank worker spec (block size 4, valid endpoints) and applies
// the given edits.
func spec(id uint64, edits ...func(*WorkerSpec)) WorkerSpec {
	s := WorkerSpec{
		WorkerID:         ptr(id),
		Endpoint:         ptr(fmt.Sprintf("http://w%d:8000", id)),
		KVEventsEndpoint: ptr(fmt.Sprintf("tcp://w%d:5557", id)),
		BlockSize:        ptr(uint32(4)),
	}
	for _, ed := range edits {
		ed(&s)
	}
	return s
}

// dp makes a spec a multi-rank worker with one KV-event endpoint per global rank.
func dp(start, size uint32) func(*WorkerSpec) {
	return func(s *WorkerSpec) {
		s.DataParallelStartRank, s.DataParallelSize = ptr(start), ptr(size)
		s.KVEventsEndpoint = nil
		s.KVEventsEndpoints = map[string]string{}
		for r := start; r < start+size; r++ {
			s.KVEventsEndpoints[fmt.Sprint(r)] = fmt.Sprintf("tcp://w%d:%d", *s.WorkerID, 6000+r)
		}
	}
}

// inModel moves a spec to another partition.
func inModel(model, group string) func(*WorkerSpec) {
	return func(s *WorkerSpec) { s.ModelName, s.RoutingGroup = ptr(model), ptr(group) }
}

// mustUpsert registers a spec and requires it to become schedulable.
func mustUpsert(t testing.TB, e *Engine, s WorkerSpec) WorkerRecord {
	t.Helper()
	rec, err := e.UpsertWorker(s)
	if err != nil {
		t.Fatalf("UpsertWorker(%d): %v", *s.WorkerID, err)
	}
	if rec.Lifecycle != LifecycleSchedulable {
		t.Fatalf("worker %d: lifecycle %s, reasons %q", rec.WorkerID, rec.Lifecycle, rec.NotSchedulableReasons)
	}
	return rec
}

// toks returns n consecutive token ids starting at lo.
func toks(lo, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(lo + i)
	}
	return out
}

// cat concatenates token slices into a fresh slice.
func cat(parts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// tokenPrompt is a Prompt with token ids.
func tokenPrompt(tokens []uint32) Prompt { return Prompt{TokenIDs: tokens} }

// selReq is a SelectRequest over tokens in the default partition.
func selReq(id string, tokens []uint32) *SelectRequest {
	r := &SelectRequest{Prompt: tokenPrompt(tokens)}
	if id != "" {
		r.SelectionID = ptr(id)
	}
	return r
}

// extHash is the external (engine) hash a test worker uses for the block at chain position i
// whose public sequence hash is seq: unique per owner, like two engines' opaque hashes.
func extHash(o kvwire.Owner, seq uint64) uint64 {
	return chainMix(o.Worker<<32|uint64(o.Rank)+1, seq)
}

// storedEvent builds a KVStored event for the complete blocks of tokens (block size bs) in tier,
// chained under the owner's block that holds the parent prefix (none when parentTokens is empty).
func storedEvent(o kvwire.Owner, tier kvwire.Tier, parentTokens, tokens []uint32, bs int) KVEvent {
	all := cat(parentTokens, tokens)
	blocks := kvhash.BlockHashes(nil, all, bs, kvhash.Seed, false, nil)
	seqs := kvhash.SequenceHashes(nil, blocks, kvhash.Seed)
	skip := len(parentTokens) / bs
	ev := KVEvent{Kind: KVStored, Tier: tier, BlockSize: bs, TokenIDs: all[skip*bs:]}
	for i := skip; i < len(seqs); i++ {
		ev.BlockHashes = append(ev.BlockHashes, extHash(o, seqs[i]))
	}
	if skip > 0 {
		ev.Parent, ev.HasParent = extHash(o, seqs[skip-1]), true
	}
	return ev
}

// kvhashSeq returns the public sequence hashes of tokens at block size 4.
func kvhashSeq(tokens []uint32) []uint64 {
	return kvhash.SequenceHashes(nil, kvhash.BlockHashes(nil, tokens, 4, kvhash.Seed, false, nil), kvhash.Seed)
}

// store applies one stored chain of tokens (from the root) for owner o in the device tier and
// requires every complete block to be indexed.
func store(t testing.TB, e *Engine, o kvwire.Owner, tokens []uint32) {
	t.Helper()
	storeTier(t, e, o, kvwire.TierDevice, nil, tokens)
}

// storeTier applies one stored chain in tier under parentTokens and checks the block count.
func storeTier(t testing.TB, e *Engine, o kvwire.Owner, tier kvwire.Tier, parentTokens, tokens []uint32) {
	t.Helper()
	ev := storedEvent(o, tier, parentTokens, tokens, 4)
	st := e.ApplyKVEvents(o, []KVEvent{ev})
	if st.StoredBlocks != len(ev.BlockHashes) || st.Dropped != 0 {
		t.Fatalf("store on %v: %+v, want %d blocks stored", o, st, len(ev.BlockHashes))
	}
}

// wantErr requires err to wrap kind and its message to contain every substring.
func wantErr(t testing.TB, err error, kind error, substrs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %q wraps %q, want %v", err, sentinelName(err), kind)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}

// noErr fails the test on a non-nil error.
func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// loadOf returns one rank's /loads row (zero row when absent).
func loadOf(e *Engine, key PartitionKey, o kvwire.Owner) PotentialLoad {
	for _, pl := range e.Loads(key.Model, key.Group) {
		if pl.ModelName != key.Model || pl.RoutingGroup != key.Group {
			continue
		}
		for _, l := range pl.Loads {
			if l.WorkerID == o.Worker && l.DPRank == o.Rank {
				return l
			}
		}
	}
	return PotentialLoad{WorkerID: o.Worker, DPRank: o.Rank}
}

// defKey is the default partition.
var defKey = PartitionKey{Model: DefaultName, Group: DefaultName}

// triple renders a load row as (active_requests, potential_decode_blocks,
// potential_prefill_tokens), the order of spec §6's replica-sync example.
func triple(l PotentialLoad) string {
	return fmt.Sprintf("(%d,%d,%d)", l.ActiveRequests, l.PotentialDecodeBlocks, l.PotentialPrefillTokens)
}
