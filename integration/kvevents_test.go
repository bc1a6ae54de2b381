package integration

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/kvselect/kvselect/internal/tcpproxy"
)

// The acceptance test of KV-event ingestion (issue 3): real pyzmq vLLM publishers feed a real
// service through its listeners, and every effect is observed only through the public HTTP API
// (/workers, /overlap_scores, /select), the way an operator or a gateway would see it.

const (
	kvModel = "kv-model"
	kvBS    = 16 // block size of every worker in these tests
)

// registerKV posts a single-rank worker with its event and replay endpoints and checks that it
// is schedulable.
func registerKV(t *testing.T, h *kvHarness, id uint64, model, events, replay string) {
	t.Helper()
	body := map[string]any{
		"worker_id": id, "model_name": model, "endpoint": fmt.Sprintf("http://w%d:8000", id),
		"block_size": kvBS, "kv_events_endpoint": events,
	}
	if replay != "" {
		body["replay_endpoint"] = replay
	}
	var rec kvRecord
	h.must(t, http.StatusCreated, "POST", "/workers", body, &rec)
	if rec.Lifecycle != "schedulable" {
		t.Fatalf("worker %d registered as %s %v", id, rec.Lifecycle, rec.Reasons)
	}
}

// arrayBatch and mapBatch wrap events in the script's batch JSON: the array form is a
// v0.10-era vLLM (7-element BlockStored, 3-element BlockRemoved); the map form is vLLM after
// PR #42892.
func arrayBatch(dpRank any, evs ...map[string]any) map[string]any {
	return map[string]any{"format": "array", "stored_len": 7, "removed_len": 3, "dp_rank": dpRank, "events": evs}
}

func mapBatch(dpRank any, evs ...map[string]any) map[string]any {
	return map[string]any{"format": "map", "dp_rank": dpRank, "events": evs}
}

// TestKVEventsEndToEnd walks the acceptance story on one service:
//
//  1. two workers register over HTTP with kv_events_endpoint and replay_endpoint; their
//     listeners become active;
//  2. BlockStored in the array form makes worker 1 win /select, and /overlap_scores shows its
//     blocks; the map form makes worker 2 (longer prefix) win;
//  3. BlockRemoved, then AllBlocksCleared on worker 2 each hand the decision back to worker 1;
//  4. a gap: worker 1's connection is cut (a TCP proxy sits between its SUB and the PUB) while
//     the publisher sends two batches, which only its replay buffer keeps; once the connection
//     is back, the listener's replay brings exactly those blocks in;
//  5. a publisher restart at the same addresses (a new process, sequence from 0): worker 1's
//     stale blocks are dropped and the new incarnation's blocks apply at once, although their
//     sequence numbers are below the old watermark.
func TestKVEventsEndToEnd(t *testing.T) {
	py := kvPython(t)
	h := newKVHarness(t)
	pub1 := startKVPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	pub2 := startKVPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	proxy := tcpproxy.New(t, hostPort(pub1.pubEP))

	registerKV(t, h, 1, kvModel, proxy.Endpoint(), pub1.replayEP)
	registerKV(t, h, 2, kvModel, pub2.pubEP, pub2.replayEP)
	h.waitActive(t, 1, 0, proxy.Endpoint())
	h.waitActive(t, 2, 0, pub2.pubEP)
	nudge1 := func() uint64 { return pub1.empty(0) }
	nudge2 := func() uint64 { return pub2.empty(0) }
	h.waitWatermark(t, 1, 0, nudge1(), nudge1)
	h.waitWatermark(t, 2, 0, nudge2(), nudge2)

	// Both workers use the same engine hashes for the same content, as vLLM does with a fixed
	// hash seed: the index must keep them apart per owner.
	// The prompt has four blocks; every step below names blocks by index into it.
	prompt, hashes := kvTokens(1, 4*kvBS), kvHashes(1, 4)
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 0 || got["2/0"] != 0 {
		t.Fatalf("overlap before any event = %v, want zeros", got)
	}
	wantWinner := func(step string, id uint64) {
		t.Helper()
		if s := h.choose(t, kvModel, prompt); s.WorkerID != id {
			t.Fatalf("%s: /select chose worker %d (%+v), want %d", step, s.WorkerID, s, id)
		}
	}

	// Stored, array form: worker 1 holds the first two blocks.
	h.waitWatermark(t, 1, 0, pub1.publish(arrayBatch(0, stored(prompt, hashes, kvBS, 0, 2))), nudge1)
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 2 || got["2/0"] != 0 {
		t.Fatalf("after array BlockStored: overlap %v, want 1/0=2 2/0=0", got)
	}
	wantWinner("array BlockStored on worker 1", 1)

	// Stored, map form: worker 2 holds three blocks, sent as two chained events.
	h.waitWatermark(t, 2, 0, pub2.publish(mapBatch(0,
		stored(prompt, hashes, kvBS, 0, 2), stored(prompt, hashes, kvBS, 2, 1))), nudge2)
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 2 || got["2/0"] != 3 {
		t.Fatalf("after map BlockStored: overlap %v, want 1/0=2 2/0=3", got)
	}
	wantWinner("map BlockStored on worker 2", 2)

	// Removed: worker 2 loses blocks 1 and 2, its prefix is one block, worker 1 wins again.
	h.waitWatermark(t, 2, 0, pub2.publish(mapBatch(0, removed(hashes[1], hashes[2]))), nudge2)
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 2 || got["2/0"] != 1 {
		t.Fatalf("after BlockRemoved: overlap %v, want 1/0=2 2/0=1", got)
	}
	wantWinner("BlockRemoved on worker 2", 1)

	// Stored again, then cleared: the decision goes to worker 2 and back to worker 1.
	h.waitWatermark(t, 2, 0, pub2.publish(mapBatch(0, stored(prompt, hashes, kvBS, 1, 2))), nudge2)
	wantWinner("BlockStored again on worker 2", 2)
	h.waitWatermark(t, 2, 0, pub2.publish(mapBatch(0, cleared())), nudge2)
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 2 || got["2/0"] != 0 {
		t.Fatalf("after AllBlocksCleared: overlap %v, want 1/0=2 2/0=0", got)
	}
	wantWinner("AllBlocksCleared on worker 2", 1)

	// Gap: the batches carrying blocks 2 and 3 never reach the listener (no subscriber while the
	// proxy refuses connections, so the PUB drops them) but stay in the replay buffer.
	before, _ := h.listener(t, 1, 0)
	proxy.Sever()
	g1 := pub1.publish(arrayBatch(0, stored(prompt, hashes, kvBS, 2, 1)))
	g2 := pub1.publish(arrayBatch(0, stored(prompt, hashes, kvBS, 3, 1)))
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 2 {
		t.Fatalf("blocks of the dropped batches %d..%d arrived without replay: overlap %v", g1, g2, got)
	}
	replays := pub1.replays()
	proxy.Resume()
	h.waitOverlap(t, kvModel, prompt, nudge1, map[string]int{"1/0": 4, "2/0": 0})
	if n := pub1.replays(); n <= replays {
		t.Fatalf("blocks of seqs %d..%d appeared but the publisher served no replay (%d → %d)", g1, g2, replays, n)
	}
	after, _ := h.listener(t, 1, 0)
	if after.Watermark == nil || *after.Watermark < g2 || *before.Watermark >= g1 {
		t.Fatalf("watermark before the gap %v, after %v; gap was %d..%d", before.Watermark, after.Watermark, g1, g2)
	}
	wantWinner("gap repaired on worker 1", 1)
	oldW := *after.Watermark

	// Restart: a new publisher process at the same addresses, numbering from 0. The old
	// process is gone first; the listener keeps redialling through the proxy. Until the new
	// incarnation publishes, nothing may change: a lost connection alone never drops blocks.
	pub1.stop()
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 4 {
		t.Fatalf("worker 1's blocks changed when its publisher went away: %v", got)
	}
	pub1b := startKVPub(t, py, "--pub", pub1.pubEP, "--replay", pub1.replayEP)
	if pub1b.pubEP != pub1.pubEP || pub1b.replayEP != pub1.replayEP {
		t.Fatalf("restarted publisher bound %s %s, want %s %s", pub1b.pubEP, pub1b.replayEP, pub1.pubEP, pub1.replayEP)
	}
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 4 {
		t.Fatalf("worker 1's blocks changed before the new incarnation published: %v", got)
	}
	// Its first batch (seq 0, below the old watermark) must apply at once: were the restart
	// not detected it would be skipped as stale, and later nudges (seq 1, 2, ...) would stay
	// below the old watermark too, so the blocks would never appear.
	fresh, freshHashes := kvTokens(2, 2*kvBS), kvHashes(2, 2)
	if s := pub1b.publish(mapBatch(0, stored(fresh, freshHashes, kvBS, 0, 2))); s != 0 {
		t.Fatalf("restarted publisher's first seq = %d, want 0", s)
	}
	nudge1b := func() uint64 { return pub1b.empty(0) }
	h.waitOverlap(t, kvModel, fresh, nudge1b, map[string]int{"1/0": 2})
	if got := h.overlap(t, kvModel, prompt); got["1/0"] != 0 {
		t.Fatalf("after the restart worker 1 still holds stale blocks: %v", got)
	}
	if s := h.choose(t, kvModel, fresh); s.WorkerID != 1 {
		t.Fatalf("/select for the new incarnation's prompt chose %+v, want worker 1", s)
	}
	l, _ := h.listener(t, 1, 0)
	if l.Watermark == nil || *l.Watermark >= oldW {
		t.Fatalf("watermark after restart %v, want below the old incarnation's %d", l.Watermark, oldW)
	}
}

// TestKVEventsDataParallel registers a worker with two data-parallel ranks, one publisher per
// rank (as vLLM runs them, port per rank) listed in kv_events_endpoints. A batch carrying
// data_parallel_rank 1 indexes its blocks under rank 1 only, and /select names that rank; a
// batch with data_parallel_rank null is attributed to the rank whose endpoint sent it; a longer
// prefix on rank 0 moves the decision to rank 0.
func TestKVEventsDataParallel(t *testing.T) {
	py := kvPython(t)
	h := newKVHarness(t)
	pubs := []*kvPub{
		startKVPub(t, py, "--pub", "tcp://127.0.0.1:0"),
		startKVPub(t, py, "--pub", "tcp://127.0.0.1:0"),
	}
	const model = "kv-dp-model"
	var rec kvRecord
	h.must(t, http.StatusCreated, "POST", "/workers", map[string]any{
		"worker_id": 7, "model_name": model, "endpoint": "http://w7:8000", "block_size": kvBS,
		"data_parallel_size":  2,
		"kv_events_endpoints": map[string]string{"0": pubs[0].pubEP, "1": pubs[1].pubEP},
	}, &rec)
	if rec.Lifecycle != "schedulable" {
		t.Fatalf("dp worker registered as %s %v", rec.Lifecycle, rec.Reasons)
	}
	// Without a replay endpoint (DP workers may not have one) a batch lost to the slow joiner
	// is gone, so each rank is warmed with empty batches until one is applied.
	nudges := make([]func() uint64, 2)
	for r, p := range pubs {
		h.waitActive(t, 7, r, p.pubEP)
		nudges[r] = func() uint64 { return p.empty(r) }
		h.waitWatermark(t, 7, r, nudges[r](), nudges[r])
	}

	prompt, hashes := kvTokens(3, 3*kvBS), kvHashes(3, 3)
	h.waitWatermark(t, 7, 1, pubs[1].publish(mapBatch(1, stored(prompt, hashes, kvBS, 0, 2))), nudges[1])
	if got := h.overlap(t, model, prompt); got["7/0"] != 0 || got["7/1"] != 2 {
		t.Fatalf("after a dp_rank 1 batch: overlap %v, want 7/0=0 7/1=2", got)
	}
	if s := h.choose(t, model, prompt); s.WorkerID != 7 || s.DPRank != 1 {
		t.Fatalf("/select chose %+v, want worker 7 dp_rank 1", s)
	}

	// data_parallel_rank null: the listener's own rank (1) owns the block.
	h.waitWatermark(t, 7, 1, pubs[1].publish(arrayBatch(nil, stored(prompt, hashes, kvBS, 2, 1))), nudges[1])
	if got := h.overlap(t, model, prompt); got["7/0"] != 0 || got["7/1"] != 3 {
		t.Fatalf("after a dp_rank null batch on rank 1's endpoint: overlap %v, want 7/0=0 7/1=3", got)
	}

	// Rank 0 gets a longer cached prefix of another prompt and wins that one.
	other, otherHashes := kvTokens(4, 3*kvBS), kvHashes(4, 3)
	h.waitWatermark(t, 7, 0, pubs[0].publish(arrayBatch(0, stored(other, otherHashes, kvBS, 0, 3))), nudges[0])
	if got := h.overlap(t, model, other); got["7/0"] != 3 || got["7/1"] != 0 {
		t.Fatalf("after a dp_rank 0 batch: overlap %v, want 7/0=3 7/1=0", got)
	}
	if s := h.choose(t, model, other); s.WorkerID != 7 || s.DPRank != 0 {
		t.Fatalf("/select chose %+v, want worker 7 dp_rank 0", s)
	}
}
