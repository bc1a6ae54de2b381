package engine

// Replica tests: the events a replica publishes (TakeEffects) and how a peer applies them
// (ApplyReplica), spec §6 and §12.1. Two engines with the same catalog stand for two replicas;
// the test carries the effects between them as the bus would.

import (
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// replicaPair returns two engines with the same catalog: worker 1 (ranks 0–1) and worker 2.
func replicaPair(t *testing.T) (a, b *Engine) {
	t.Helper()
	a, b = newEngine(t, nil), newEngine(t, nil)
	for _, e := range []*Engine{a, b} {
		mustUpsert(t, e, spec(1, dp(0, 2)))
		mustUpsert(t, e, spec(2))
	}
	return a, b
}

// ship applies every pending effect of from to to and requires each to be accepted.
func ship(t *testing.T, from, to *Engine, now time.Time) []ReplicaEvent {
	t.Helper()
	fx := from.TakeEffects(nil)
	for i := range fx {
		if !to.ApplyReplica(&fx[i], now) {
			t.Fatalf("peer dropped %+v", fx[i])
		}
	}
	return fx
}

// TestReplicaSyncExample is spec §6's replica-sync example: a 4-token booking at block size 4
// shows on the peer as (active_requests, potential_decode_blocks, potential_prefill_tokens) =
// (1,1,4), then (1,1,0) after prefill_complete and (0,0,0) after free. Output blocks are local.
func TestReplicaSyncExample(t *testing.T) {
	a, b := replicaPair(t)
	resp, err := a.SelectAndReserve(selReq("r1", toks(0, 4)), t0)
	noErr(t, err)
	o := kvwire.Owner{Worker: resp.WorkerID, Rank: resp.DPRank}
	fx := ship(t, a, b, t0)
	if len(fx) != 1 || fx[0].Kind != LifecycleAdd || fx[0].Add == nil || fx[0].Add.ISL != 4 || !fx[0].Add.TrackPrefill ||
		fx[0].Partition != defKey || fx[0].BlockSize != 4 || fx[0].Owner != o {
		t.Fatalf("admission event %+v", fx)
	}
	if got := triple(loadOf(b, defKey, o)); got != "(1,1,4)" {
		t.Fatalf("peer after booking %s, want (1,1,4)", got)
	}
	noErr(t, a.PrefillComplete("r1"))
	if fx := ship(t, a, b, t0); len(fx) != 1 || fx[0].Kind != LifecyclePrefillComplete {
		t.Fatalf("prefill effects %+v", fx)
	}
	if got := triple(loadOf(b, defKey, o)); got != "(1,1,0)" {
		t.Fatalf("peer after prefill_complete %s, want (1,1,0)", got)
	}
	noErr(t, a.OutputBlock("r1", nil))
	if fx := a.TakeEffects(nil); len(fx) != 0 {
		t.Fatalf("output_block was published: %+v", fx)
	}
	if got, peer := triple(loadOf(a, defKey, o)), triple(loadOf(b, defKey, o)); got != "(1,2,0)" || peer != "(1,1,0)" {
		t.Fatalf("output block: local %s peer %s", got, peer)
	}
	noErr(t, a.Free("r1"))
	if fx := ship(t, a, b, t0); len(fx) != 1 || fx[0].Kind != LifecycleFree {
		t.Fatalf("free effects %+v", fx)
	}
	if got := triple(loadOf(b, defKey, o)); got != "(0,0,0)" {
		t.Fatalf("peer after free %s, want (0,0,0)", got)
	}
}

// TestApplyReplicaMirrorsLifecycle: a mirrored admission is a local reservation row: lifecycle
// calls work on the peer, conflicts are detected there, and it counts in the peer's selection.
func TestApplyReplicaMirrorsLifecycle(t *testing.T) {
	a, b := replicaPair(t)
	r := selReq("m", toks(0, 16))
	r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(1))}
	_, err := a.SelectAndReserve(r, t0)
	noErr(t, err)
	ship(t, a, b, t0)
	o := kvwire.Owner{Worker: 1, Rank: 1}
	if !slices.Equal(b.Loads("", "")[0].Loads, a.Loads("", "")[0].Loads) {
		t.Fatalf("loads differ:\n%+v\n%+v", a.Loads("", ""), b.Loads("", ""))
	}
	_, err = b.SelectAndReserve(selReq("m", toks(0, 4)), t0)
	wantErr(t, err, ErrConflict, "selection m is already reserved")
	// The peer's selection sees the mirrored blocks as live on rank 1/1.
	resp, err := b.Select(selReq("", toks(0, 16)), t0)
	noErr(t, err)
	if resp.WorkerID == 1 && resp.DPRank == 1 {
		t.Fatalf("loaded rank chosen while identical idle ranks exist")
	}
	noErr(t, b.OutputBlock("m", nil))
	noErr(t, b.PrefillComplete("m"))
	if got := triple(loadOf(b, defKey, o)); got != "(1,5,0)" {
		t.Fatalf("peer lifecycle %s", got)
	}
	noErr(t, b.Free("m"))
	if fx := ship(t, b, a, t0); len(fx) != 2 || fx[1].Kind != LifecycleFree {
		t.Fatalf("peer-side calls publish like local ones: %+v", fx)
	}
	if got := triple(loadOf(a, defKey, o)); got != "(0,0,0)" {
		t.Fatalf("the owner did not apply the peer's free: %s", got)
	}

	// The expiry sweep frees mirrored bookings without publishing their frees (the owning
	// replica publishes its own).
	_, _ = a.SelectAndReserve(selReq("old", toks(0, 8)), t0)
	ship(t, a, b, t0)
	if n := b.Sweep(t0.Add(301 * time.Second)); n != 1 {
		t.Fatalf("peer sweep freed %d, want 1", n)
	}
	if fx := b.TakeEffects(nil); len(fx) != 0 {
		t.Fatalf("peer sweep published %+v", fx)
	}
	wantErr(t, b.Free("old"), ErrNotFound)
	if n := a.Sweep(t0.Add(301 * time.Second)); n != 1 {
		t.Fatalf("owner sweep freed %d", n)
	}
	if fx := a.TakeEffects(nil); len(fx) != 1 || fx[0].Kind != LifecycleFree || fx[0].RequestID != "old" {
		t.Fatalf("owner sweep must publish the expiry free: %+v", fx)
	}
}

// TestApplyReplicaReplacesStaleRow: a peer admission replaces a local row with the same id.
func TestApplyReplicaReplacesStaleRow(t *testing.T) {
	a, b := replicaPair(t)
	_, err := b.Reserve(&ReservationRequest{SelectionID: ptr("dup"), WorkerID: ptr(uint64(2)), Prompt: tokenPrompt(toks(0, 8))}, t0)
	noErr(t, err)
	_ = b.TakeEffects(nil)
	_, err = a.Reserve(&ReservationRequest{SelectionID: ptr("dup"), WorkerID: ptr(uint64(1)), Prompt: tokenPrompt(toks(0, 8))}, t0)
	noErr(t, err)
	ship(t, a, b, t0)
	if l := loadOf(b, defKey, kvwire.Owner{Worker: 2}); l.ActiveRequests != 0 {
		t.Fatalf("stale local booking kept: %+v", l)
	}
	if l := loadOf(b, defKey, kvwire.Owner{Worker: 1}); l.ActiveRequests != 1 {
		t.Fatalf("peer booking missing: %+v", l)
	}
}

// TestApplyReplicaDrops: events for unknown partitions, workers, ranks or block sizes, malformed
// admissions and lifecycle events for unknown ids are dropped and change nothing.
func TestApplyReplicaDrops(t *testing.T) {
	_, b := replicaPair(t)
	_, _ = b.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(7)), ModelName: ptr(DefaultName)}) // incomplete
	add := func(edit func(*ReplicaEvent)) ReplicaEvent {
		ev := ReplicaEvent{Partition: defKey, BlockSize: 4, RequestID: "x", Owner: kvwire.Owner{Worker: 1}, Kind: LifecycleAdd,
			Add: &ReplicaAdd{TokenSequence: []uint64{1, 2}, TrackPrefill: true, PrefillTokens: 8, ISL: 8}}
		edit(&ev)
		return ev
	}
	tests := []struct {
		name string
		ev   ReplicaEvent
	}{
		{"unknown partition", add(func(ev *ReplicaEvent) { ev.Partition = PartitionKey{Model: "m9", Group: DefaultName} })},
		{"unknown worker", add(func(ev *ReplicaEvent) { ev.Owner.Worker = 9 })},
		{"incomplete worker", add(func(ev *ReplicaEvent) { ev.Owner.Worker = 7 })},
		{"unknown rank", add(func(ev *ReplicaEvent) { ev.Owner.Rank = 5 })},
		{"block size mismatch", add(func(ev *ReplicaEvent) { ev.BlockSize = 16 })},
		{"admission without body", add(func(ev *ReplicaEvent) { ev.Add = nil })},
		{"prefill complete of unknown id", add(func(ev *ReplicaEvent) { ev.Kind, ev.Add = LifecyclePrefillComplete, nil })},
		{"free of unknown id", add(func(ev *ReplicaEvent) { ev.Kind, ev.Add = LifecycleFree, nil })},
		{"unknown kind", add(func(ev *ReplicaEvent) { ev.Kind = 42 })},
	}
	before := b.Loads("", "")
	for _, tc := range tests {
		if b.ApplyReplica(&tc.ev, t0) {
			t.Errorf("%s: applied", tc.name)
		}
		if !slices.EqualFunc(before, b.Loads("", ""), func(x, y PartitionLoads) bool { return slices.Equal(x.Loads, y.Loads) }) || len(b.resv) != 0 {
			t.Errorf("%s changed state", tc.name)
		}
	}
	// A lifecycle event naming another partition than the booking's is dropped too.
	good := add(func(*ReplicaEvent) {})
	if !b.ApplyReplica(&good, t0) {
		t.Fatalf("valid admission dropped")
	}
	mustUpsert(t, b, spec(3, inModel("m", "g")))
	wrong := ReplicaEvent{Partition: PartitionKey{Model: "m", Group: "g"}, BlockSize: 4, RequestID: "x", Kind: LifecycleFree}
	if b.ApplyReplica(&wrong, t0) {
		t.Fatalf("free across partitions applied")
	}
	if l := loadOf(b, defKey, kvwire.Owner{Worker: 1}); triple(l) != "(1,2,8)" {
		t.Fatalf("mirrored admission %s, want (1,2,8)", triple(l))
	}
	// Untracked prefill in the admission contributes nothing.
	untracked := add(func(ev *ReplicaEvent) { ev.RequestID = "y"; ev.Owner.Worker = 2; ev.Add.TrackPrefill = false })
	if !b.ApplyReplica(&untracked, t0) || loadOf(b, defKey, kvwire.Owner{Worker: 2}).PotentialPrefillTokens != 0 {
		t.Fatalf("untracked admission counted prefill")
	}
}
