package integration

import (
	"net/http"
	"strings"
	"testing"
)

// Listener reconciliation seen through the HTTP API (spec §3.4–3.5): a rank whose event and
// replay endpoints are unchanged keeps its listener, watermark and blocks; a changed endpoint
// gets a fresh listener and loses the old blocks; DELETE stops the listener; an invalid endpoint
// leaves the worker incomplete until a PATCH heals it.

// listenerCount is the number of listeners the service runs, whatever their status. It reads
// the service's own counters (the same numbers /metrics exports): the HTTP record shows only
// listeners of workers still in the catalog, so a leaked listener of a deleted or re-pointed
// rank would be invisible there.
func listenerCount(h *kvHarness) int {
	n := 0
	for _, c := range h.svc.Stats().ListenersByStatus {
		n += c
	}
	return n
}

// TestKVEventsReconcileLifecycle follows one worker through PATCH (unchanged endpoints), PATCH
// (new endpoint), DELETE and re-registration, checking at each step the listener identity (by
// its watermark and the publishers' replay counters) and the indexed blocks.
func TestKVEventsReconcileLifecycle(t *testing.T) {
	py := kvPython(t)
	h := newKVHarness(t)
	pubA := startKVPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	pubB := startKVPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	nudgeA := func() uint64 { return pubA.empty(0) }
	nudgeB := func() uint64 { return pubB.empty(0) }

	// Baseline: worker 1 follows publisher A and holds two blocks; remember its listener's
	// watermark and how many replays A has served so far.
	registerKV(t, h, 1, kvModel, pubA.pubEP, pubA.replayEP)
	h.waitActive(t, 1, 0, pubA.pubEP)
	promptA, hashesA := kvTokens(10, 3*kvBS), kvHashes(10, 3)
	h.waitWatermark(t, 1, 0, pubA.publish(mapBatch(0, stored(promptA, hashesA, kvBS, 0, 2))), nudgeA)
	h.waitOverlap(t, kvModel, promptA, nil, map[string]int{"1/0": 2})
	l0, _ := h.listener(t, 1, 0)
	replaysA := pubA.replays()

	// PATCH with the same endpoints: the record in the answer already shows the kept listener
	// with its watermark (a fresh one would have none), the blocks stay, and the next batch
	// continues the sequence without any replay.
	var rec kvRecord
	h.must(t, http.StatusOK, "PATCH", "/workers/1", map[string]any{"total_kv_blocks": 4096, "taints": []string{"spot"}}, &rec)
	if l := rec.Listeners["0"]; rec.Lifecycle != "schedulable" || l.Endpoint != pubA.pubEP || l.Watermark == nil || *l.Watermark != *l0.Watermark {
		t.Fatalf("PATCH with unchanged endpoints: record %+v, want the listener kept at watermark %d", rec, *l0.Watermark)
	}
	if got := h.overlap(t, kvModel, promptA); got["1/0"] != 2 {
		t.Fatalf("PATCH with unchanged endpoints dropped blocks: %v", got)
	}
	next := pubA.publish(mapBatch(0, stored(promptA, hashesA, kvBS, 2, 1)))
	if next != *l0.Watermark+1 {
		t.Fatalf("publisher seq %d does not follow watermark %d", next, *l0.Watermark)
	}
	h.waitWatermark(t, 1, 0, next, nil) // no nudging: the batch must arrive on the kept SUB
	if got := h.overlap(t, kvModel, promptA); got["1/0"] != 3 {
		t.Fatalf("batch after PATCH not applied: %v", got)
	}
	if n := pubA.replays(); n != replaysA {
		t.Fatalf("PATCH with unchanged endpoints caused a replay (%d → %d)", replaysA, n)
	}
	if n := listenerCount(h); n != 1 {
		t.Fatalf("%d listeners after PATCH, want 1", n)
	}

	// PATCH with a new endpoint: a fresh listener (no watermark yet), the old blocks are gone,
	// the new publisher's blocks apply.
	rec = kvRecord{}
	h.must(t, http.StatusOK, "PATCH", "/workers/1", map[string]any{"kv_events_endpoint": pubB.pubEP, "replay_endpoint": pubB.replayEP}, &rec)
	if l := rec.Listeners["0"]; l.Endpoint != pubB.pubEP || l.Watermark != nil {
		t.Fatalf("PATCH with a new endpoint: listener %+v, want a fresh one on %s", l, pubB.pubEP)
	}
	if got := h.overlap(t, kvModel, promptA); got["1/0"] != 0 {
		t.Fatalf("blocks of the replaced endpoint survived: %v", got)
	}
	if n := listenerCount(h); n != 1 {
		t.Fatalf("%d listeners after changing the endpoint, want 1 (the old one must be closed)", n)
	}
	h.waitActive(t, 1, 0, pubB.pubEP)
	promptB, hashesB := kvTokens(11, 2*kvBS), kvHashes(11, 2)
	pubB.publish(arrayBatch(0, stored(promptB, hashesB, kvBS, 0, 2)))
	h.waitOverlap(t, kvModel, promptB, nudgeB, map[string]int{"1/0": 2})

	// DELETE stops the listener and drops the worker's blocks.
	h.must(t, http.StatusOK, "DELETE", "/workers/1", nil, nil)
	if _, ok := h.worker(t, 1); ok {
		t.Fatal("worker 1 still listed after DELETE")
	}
	if n := listenerCount(h); n != 0 {
		t.Fatalf("%d listeners after DELETE, want 0", n)
	}

	// Registering again starts from scratch: no watermark, no blocks, and the first batch the
	// new listener sees (seq > 0) makes it replay from 0, which brings promptB's blocks back.
	replaysB := pubB.replays()
	var again kvRecord
	h.must(t, http.StatusCreated, "POST", "/workers", map[string]any{
		"worker_id": 1, "model_name": kvModel, "endpoint": "http://w1:8000", "block_size": kvBS,
		"kv_events_endpoint": pubB.pubEP, "replay_endpoint": pubB.replayEP,
	}, &again)
	if l := again.Listeners["0"]; l.Watermark != nil {
		t.Fatalf("re-registered worker kept a watermark: %+v", l)
	}
	if got := h.overlap(t, kvModel, promptB); got["1/0"] != 0 {
		t.Fatalf("re-registered worker has blocks before any batch: %v", got)
	}
	h.waitActive(t, 1, 0, pubB.pubEP)
	h.waitOverlap(t, kvModel, promptB, nudgeB, map[string]int{"1/0": 2})
	if n := pubB.replays(); n <= replaysB {
		t.Fatalf("re-registered listener did not replay from 0 (%d → %d)", replaysB, n)
	}
}

// TestKVEventsReconcileInvalidEndpoint registers workers whose event or replay endpoint fails
// ZMQ validation: each is answered 201 but stays incomplete with a "reconciliation failed"
// reason, runs no listener and is never selected; a PATCH with valid endpoints heals it and its
// events then change /select.
func TestKVEventsReconcileInvalidEndpoint(t *testing.T) {
	py := kvPython(t)
	h := newKVHarness(t)
	pub := startKVPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	nudge := func() uint64 { return pub.empty(0) }

	cases := []struct {
		name           string
		events, replay string
		reason         string // expected prefix of the single not_schedulable reason
	}{
		// The reasons are Dynamo's texts (spec §3.4 step 7 and §10.7), which clients parse.
		{"events port not a number", "tcp://127.0.0.1:notaport", "",
			"reconciliation failed: invalid kv_events endpoint for worker 21 dp_rank 0: invalid ZMQ endpoint `tcp://127.0.0.1:notaport`: invalid TCP port"},
		{"events unsupported scheme", "udp://127.0.0.1:5557", "",
			"reconciliation failed: invalid kv_events endpoint for worker 22 dp_rank 0: invalid ZMQ endpoint `udp://127.0.0.1:5557`: unsupported scheme"},
		{"events port out of range", "tcp://127.0.0.1:70000", "",
			"reconciliation failed: invalid kv_events endpoint for worker 23 dp_rank 0: invalid ZMQ endpoint `tcp://127.0.0.1:70000`: invalid TCP port"},
		{"replay without port", pub.pubEP, "tcp://127.0.0.1",
			"reconciliation failed: invalid replay endpoint for worker 24: invalid ZMQ endpoint `tcp://127.0.0.1`: missing TCP port"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := uint64(21 + i)
			model := "kv-invalid-" + tc.name
			body := map[string]any{
				"worker_id": id, "model_name": model, "endpoint": "http://w:8000", "block_size": kvBS,
				"kv_events_endpoint": tc.events,
			}
			if tc.replay != "" {
				body["replay_endpoint"] = tc.replay
			}
			var rec kvRecord
			h.must(t, http.StatusCreated, "POST", "/workers", body, &rec)
			if rec.Lifecycle != "incomplete" || len(rec.Reasons) != 1 || !strings.HasPrefix(rec.Reasons[0], tc.reason) {
				t.Fatalf("record %+v, want incomplete with reason %q", rec, tc.reason)
			}
			if len(rec.Listeners) != 0 {
				t.Fatalf("incomplete worker runs listeners: %+v", rec.Listeners)
			}
			// Each case has its own model, so the incomplete worker is alone in its partition
			// and /select has no candidate at all (503), whatever other cases registered.
			prompt := kvTokens(30+i, 2*kvBS)
			if code, b := h.call(t, "POST", "/select", map[string]any{"model_name": model, "token_ids": prompt}, nil); code != http.StatusServiceUnavailable {
				t.Fatalf("/select with only an incomplete worker = %d %s, want 503", code, b)
			}

			var healed kvRecord // a fresh value: a decode into rec would keep its old reasons
			h.must(t, http.StatusOK, "PATCH", "/workers/"+itoa(id), map[string]any{
				"kv_events_endpoint": pub.pubEP, "replay_endpoint": pub.replayEP,
			}, &healed)
			if healed.Lifecycle != "schedulable" || len(healed.Reasons) != 0 || healed.Listeners["0"].Endpoint != pub.pubEP {
				t.Fatalf("after PATCH: %+v, want schedulable with a listener on %s", healed, pub.pubEP)
			}
			// One publisher serves every case: PUB fans out to all subscribed listeners, and each
			// case checks only its own model's prompt.
			h.waitActive(t, id, 0, pub.pubEP)
			pub.publish(mapBatch(0, stored(prompt, kvHashes(30+i, 2), kvBS, 0, 2)))
			h.waitOverlap(t, model, prompt, nudge, map[string]int{itoa(id) + "/0": 2})
			if s := h.choose(t, model, prompt); s.WorkerID != id {
				t.Fatalf("/select chose %+v, want healed worker %d", s, id)
			}
		})
	}
}
