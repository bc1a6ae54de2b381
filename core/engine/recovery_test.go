package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine/kvhash"
	"github.com/kvselect/kvselect/kvwire"
)

// chainEvent builds a stored RouterEvent of owner o holding the public blocks of toks (block
// size 4) from the root, with external hashes derived from the owner.
func chainEvent(o kvwire.Owner, tier kvwire.Tier, toks []uint32) RouterEvent {
	ev := RouterEvent{Owner: o, Tier: tier, Kind: RouterStored}
	seed := kvhash.BlockSeed("", "")
	for i := 0; i+4 <= len(toks); i += 4 {
		ev.Blocks = append(ev.Blocks, RecoveredBlock{External: o.Worker<<40 | uint64(o.Rank)<<32 | uint64(i), Local: kvhash.BlockHash(toks[i:i+4], seed, nil)})
	}
	return ev
}

func seqTokens(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

// overlapOf returns the device blocks of owner o for prompt toks in partition key.
func overlapOf(t *testing.T, e *Engine, model string, toks []uint32, o kvwire.Owner) uint64 {
	t.Helper()
	q := &PromptQuery{ModelName: ptr(model), Prompt: Prompt{TokenIDs: toks}}
	res, err := e.OverlapScores(q)
	if err != nil {
		t.Fatalf("OverlapScores: %v", err)
	}
	for _, r := range res.Workers {
		if r.WorkerID == o.Worker && r.DPRank == o.Rank {
			return r.DeviceBlocks
		}
	}
	return 0
}

// TestRecoveredIndexInstallCases covers replace, merge and the refusals.
func TestRecoveredIndexInstallCases(t *testing.T) {
	key := PartitionKey{Model: DefaultName, Group: DefaultName}
	build := func(bs uint32, evs ...RouterEvent) *RecoveredIndex {
		r := NewRecoveredIndex(bs)
		for i := range evs {
			if err := r.Apply(&evs[i]); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	t.Run("replace empty partition", func(t *testing.T) {
		e := newEngine(t, nil)
		if _, err := e.UpsertWorker(spec(1)); err != nil {
			t.Fatal(err)
		}
		out, err := e.InstallRecovered(key, build(4, chainEvent(kvwire.Owner{Worker: 1}, kvwire.TierDevice, seqTokens(8))))
		if err != nil || out != InstalledReplaced {
			t.Fatalf("%v %v", out, err)
		}
		if got := overlapOf(t, e, DefaultName, seqTokens(8), kvwire.Owner{Worker: 1}); got != 2 {
			t.Fatalf("overlap %d", got)
		}
	})
	t.Run("merge into live entries", func(t *testing.T) {
		e := newEngine(t, nil)
		for _, id := range []uint64{1, 2} {
			if _, err := e.UpsertWorker(spec(id)); err != nil {
				t.Fatal(err)
			}
		}
		live := chainEvent(kvwire.Owner{Worker: 1}, kvwire.TierDevice, seqTokens(4))
		e.ApplyKVEvents(kvwire.Owner{Worker: 1}, []KVEvent{{Kind: KVStored, BlockHashes: []uint64{live.Blocks[0].External},
			LocalHashes: []uint64{live.Blocks[0].Local}, BlockSize: 4}})
		out, err := e.InstallRecovered(key, build(4, chainEvent(kvwire.Owner{Worker: 2}, kvwire.TierDevice, seqTokens(12))))
		if err != nil || out != InstalledMerged {
			t.Fatalf("%v %v", out, err)
		}
		if a, b := overlapOf(t, e, DefaultName, seqTokens(12), kvwire.Owner{Worker: 1}), overlapOf(t, e, DefaultName, seqTokens(12), kvwire.Owner{Worker: 2}); a != 1 || b != 3 {
			t.Fatalf("overlaps %d %d, want 1 (live) and 3 (recovered)", a, b)
		}
	})
	t.Run("block size mismatch", func(t *testing.T) {
		e := newEngine(t, nil)
		if _, err := e.UpsertWorker(spec(1)); err != nil {
			t.Fatal(err)
		}
		r := build(16, chainEvent(kvwire.Owner{Worker: 1}, kvwire.TierDevice, seqTokens(8)))
		_, err := e.InstallRecovered(key, r)
		if !errors.Is(err, ErrRecoveryBlockSize) || !errors.Is(err, ErrConflict) {
			t.Fatalf("err %v", err)
		}
		if r.Entries() != 2 || e.parts[key].index.Stats().Entries != 0 {
			t.Fatal("a refused install changed something")
		}
	})
	t.Run("unknown block size", func(t *testing.T) {
		e := newEngine(t, nil)
		if _, err := e.InstallRecovered(key, build(0)); !errors.Is(err, ErrRecoveryBlockSize) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("approximate mode", func(t *testing.T) {
		e := newEngine(t, approxConfig())
		if _, err := e.InstallRecovered(key, build(4)); !errors.Is(err, ErrRecoveryDisabled) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("installed twice", func(t *testing.T) {
		e := newEngine(t, nil)
		r := build(4)
		if _, err := e.InstallRecovered(key, r); err != nil {
			t.Fatal(err)
		}
		if _, err := e.InstallRecovered(key, r); !errors.Is(err, ErrRecoveryConsumed) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("pending then mismatching partition discards", func(t *testing.T) {
		e := newEngine(t, nil)
		if _, err := e.InstallRecovered(key, build(16, chainEvent(kvwire.Owner{Worker: 1}, kvwire.TierDevice, seqTokens(8)))); err != nil {
			t.Fatal(err)
		}
		if _, err := e.UpsertWorker(spec(1)); err != nil { // block size 4
			t.Fatal(err)
		}
		if p := e.RecoveredPending(); p.Partitions != 0 || p.Discarded != 1 {
			t.Fatalf("pending %+v", p)
		}
		if e.parts[key].index.Stats().Entries != 0 {
			t.Fatal("mismatching recovered entries adopted")
		}
	})
	t.Run("pending merges pending", func(t *testing.T) {
		e := newEngine(t, nil)
		for _, w := range []uint64{1, 2} {
			if _, err := e.InstallRecovered(key, build(4, chainEvent(kvwire.Owner{Worker: w}, kvwire.TierDevice, seqTokens(8)))); err != nil {
				t.Fatal(err)
			}
		}
		if p := e.RecoveredPending(); p.Partitions != 1 || p.Entries != 4 {
			t.Fatalf("pending %+v", p)
		}
		if _, err := e.InstallRecovered(key, build(8)); !errors.Is(err, ErrRecoveryBlockSize) {
			t.Fatalf("mismatch with pending: %v", err)
		}
	})
}

// TestRecoveredIndexApply: malformed events poison the index; misfits are skipped and counted.
func TestRecoveredIndexApply(t *testing.T) {
	r := NewRecoveredIndex(4)
	o := kvwire.Owner{Worker: 9}
	orphan := RouterEvent{Owner: o, Kind: RouterStored, Parent: 12345, HasParent: true, Blocks: []RecoveredBlock{{External: 1, Local: 2}}}
	dup := RouterEvent{Owner: o, Kind: RouterStored, Blocks: []RecoveredBlock{{External: 1, Local: 2}, {External: 1, Local: 3}}}
	unknownRm := RouterEvent{Owner: o, Kind: RouterRemoved, Removed: []uint64{77}}
	empty := RouterEvent{Owner: o, Kind: RouterStored}
	for _, ev := range []RouterEvent{orphan, dup, unknownRm, empty} {
		if err := r.Apply(&ev); err != nil {
			t.Fatalf("misfit %+v: %v", ev, err)
		}
	}
	if st := r.Stats(); st.Skipped != 3 || st.Events != 4 || st.StoredBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	ok := chainEvent(o, kvwire.TierHostPinned, seqTokens(8))
	if err := r.Apply(&ok); err != nil {
		t.Fatal(err)
	}
	rm := RouterEvent{Owner: o, Tier: kvwire.TierHostPinned, Kind: RouterRemoved, Removed: []uint64{ok.Blocks[1].External}}
	clr := RouterEvent{Owner: kvwire.Owner{Worker: 5}, Kind: RouterCleared}
	for _, ev := range []RouterEvent{rm, clr} {
		if err := r.Apply(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.StoredBlocks != 2 || st.RemovedBlocks != 1 || st.Cleared != 1 || r.Entries() != 1 {
		t.Fatalf("stats %+v entries %d", st, r.Entries())
	}
	for _, bad := range []RouterEvent{{Owner: o, Kind: 0}, {Owner: o, Kind: RouterCleared, Tier: kvwire.NumTiers}} {
		r := NewRecoveredIndex(4)
		if err := r.Apply(&bad); !errors.Is(err, ErrRecoveryInvalid) || !errors.Is(err, ErrRecoveryPoisoned) {
			t.Fatalf("malformed %+v: %v", bad, err)
		}
		good := chainEvent(o, kvwire.TierDevice, seqTokens(4))
		if err := r.Apply(&good); !errors.Is(err, ErrRecoveryPoisoned) {
			t.Fatal("poisoned index accepted a later event")
		}
		e := newEngine(t, nil)
		if _, err := e.InstallRecovered(PartitionKey{Model: "m", Group: "g"}, r); !errors.Is(err, ErrRecoveryPoisoned) || !errors.Is(err, ErrBadRequest) {
			t.Fatalf("poisoned install: %v", err)
		}
		if len(e.DumpKeys()) != 0 {
			t.Fatal("poisoned index installed")
		}
	}
}

// TestDumpRecordsMatchDumpPartition: the compact records encode to exactly the bytes of the
// original single-buffer dump.
func TestDumpRecordsMatchDumpPartition(t *testing.T) {
	e := newEngine(t, nil)
	for _, id := range []uint64{1, 2} {
		if _, err := e.UpsertWorker(spec(id, dp(0, 2))); err != nil {
			t.Fatal(err)
		}
	}
	key := PartitionKey{Model: DefaultName, Group: DefaultName}
	r := NewRecoveredIndex(4)
	for _, o := range []kvwire.Owner{{Worker: 1}, {Worker: 1, Rank: 1}, {Worker: 2, Rank: 1}} {
		for _, tier := range []kvwire.Tier{kvwire.TierDevice, kvwire.TierDisk} {
			ev := chainEvent(o, tier, seqTokens(4*int(3+o.Rank)))
			if err := r.Apply(&ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.InstallRecovered(key, r); err != nil {
		t.Fatal(err)
	}
	old, bs, n, ok := e.DumpPartition(key, nil)
	recs, blocks, bs2, ok2 := e.DumpPartitionRecords(key, nil, nil)
	if !ok || !ok2 || bs != bs2 || n != len(recs) || n == 0 {
		t.Fatalf("dump %d/%d events, bs %d/%d", n, len(recs), bs, bs2)
	}
	buf := []byte{'['}
	for i := range recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendDumpRecord(buf, uint64(i), &recs[i], blocks)
	}
	buf = append(buf, ']')
	if !slices.Equal(buf, old) {
		t.Fatalf("record encoding differs:\n%s\n%s", buf, old)
	}
}
