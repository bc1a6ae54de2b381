package api_test

// "Bad input gets a clear 4xx and changes nothing" (DESIGN.md): every rejected request below is
// sent to a service holding workers in two partitions, live bookings in several lifecycle
// states and a pending selection, and GET /workers, GET /loads and GET /dump must read the same
// before and after it. The pending-selection cache, which no route lists, is checked at the end
// through replays.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// rejected is one request that must be refused.
type rejected struct {
	method, path, body string
	hdr                []string
	status             int
}

// badInputs lists rejected requests for every route. Ids starting with "rej-" are never booked
// or cached by any of them.
func badInputs() []rejected {
	big := `{"worker_id":9,"endpoint":"http://w9","block_size":4}` + strings.Repeat(" ", 8<<20)
	noCT := []string{"Content-Type", ""}
	textCT := []string{"Content-Type", "text/plain"}
	return []rejected{
		// Worker catalog. Each body would register a schedulable worker 9 (or rewrite worker 1)
		// if its one defect were ignored, so a leak shows in GET /workers.
		{"POST", "/workers", `{"worker_id":9,"endpoint":"http://w9","block_size":4`, nil, 400},
		{"POST", "/workers", `{"worker_id":"9","endpoint":"http://w9","block_size":4}`, nil, 422},
		{"POST", "/workers", `{"endpoint":"http://w9","block_size":4}`, nil, 422},
		{"POST", "/workers", `{"worker_id":1,"kv_transfer_enforcement":"always"}`, nil, 422},
		{"POST", "/workers", `{"worker_id":1,"kv_event_source_mode":"x"}`, nil, 422},
		{"POST", "/workers", `{"worker_id":1,"kv_events_endpoints":{"-1":"tcp://a:1"}}`, nil, 422},
		{"POST", "/workers", `null`, nil, 422},
		{"POST", "/workers", `{"worker_id":9,"endpoint":"http://w9","block_size":4}`, noCT, 415},
		{"POST", "/workers", `{"worker_id":9,"endpoint":"http://w9","block_size":4}`, textCT, 415},
		{"POST", "/workers", big, nil, 413},
		// Routing refusals carrying a valid body must not reach any handler.
		{"POST", "/workers/", `{"worker_id":9,"endpoint":"http://w9","block_size":4}`, nil, 404},
		{"PUT", "/workers", `{"worker_id":9,"endpoint":"http://w9","block_size":4}`, nil, 405},
		// A PATCH to block size 8 would move worker 1 out of its partition's shape.
		{"PATCH", "/workers/1", `{"block_size":"8"}`, nil, 422},
		{"PATCH", "/workers/1", `{"kv_transfer_enforcement":"x"}`, nil, 422},
		{"PATCH", "/workers/1", `null`, nil, 422},
		{"PATCH", "/workers/1", `{"block_size":8`, nil, 400},
		{"PATCH", "/workers/1", `{"block_size":8}`, noCT, 415},
		{"PATCH", "/workers/99", `{"block_size":8}`, nil, 404},
		{"PATCH", "/workers/x", `{"block_size":8}`, nil, 400},
		{"PATCH", "/workers/-1", `{"block_size":8}`, nil, 400},
		{"DELETE", "/workers/99", ``, nil, 404},
		{"DELETE", "/workers/1x", ``, nil, 400},
		{"DELETE", "/workers/1/", ``, nil, 404},
		// Selection. Rejected selects carry ids that the end of the test checks were not
		// cached; rejected select_and_reserve calls would otherwise book.
		{"POST", "/select", `{"selection_id":"rej-1"}`, nil, 400},
		{"POST", "/select", `{"selection_id":"rej-2","token_ids":[1],"session_context":{}}`, nil, 422},
		{"POST", "/select", `{"selection_id":"rej-3","model_name":"nope","token_ids":[1]}`, nil, 503},
		{"POST", "/select", `{"selection_id":"rej-4","token_ids":[1],"allowed_worker_ids":[42]}`, nil, 503},
		{"POST", "/select", `{"selection_id":"rej-5","token_ids":[1],"router_config_override":{"overlap_score_credit":-1}}`, nil, 422},
		{"POST", "/select", `{"selection_id":"rej-6","token_ids":[1]}`, noCT, 415},
		{"POST", "/select", `{"selection_id":"rej-7","token_ids":[1]}x`, nil, 400},
		// Duplicates of live bookings, in either partition.
		{"POST", "/select_and_reserve", `{"selection_id":"b1","token_ids":[1,2,3,4]}`, nil, 409},
		{"POST", "/select_and_reserve", `{"selection_id":"b2","model_name":"m2","routing_group":"g","token_ids":[1]}`, nil, 409},
		{"POST", "/select_and_reserve", `{"selection_id":"rej-8","block_hashes":[1,2],"sequence_hashes":[1],"isl_tokens":8}`, nil, 400},
		{"POST", "/select_and_reserve", `{"selection_id":"rej-9","token_ids":[1],"pinned_worker":{"worker_id":1}}`, nil, 422},
		{"POST", "/select_and_reserve", `{"selection_id":"rej-10","token_ids":[1],"pinned_worker":{"worker_id":4,"dp_rank":0}}`, nil, 503},
		{"POST", "/select_and_reserve", `{"selection_id":"rej-11","model_name":"nope","token_ids":[1]}`, nil, 503},
		{"POST", "/select_and_reserve", `{"selection_id":"rej-12","token_ids":[1],"routing_constraints":{"required_taints":["none"]}}`, nil, 503},
		{"POST", "/select_and_reserve/", `{"selection_id":"rej-13","token_ids":[1,2,3,4]}`, nil, 404},
		{"GET", "/select_and_reserve", ``, nil, 405},
		// Reservations. The replay of "keep" in the wrong partition must not consume it.
		{"POST", "/reservations", `{"selection_id":"rej-14"}`, nil, 404},
		{"POST", "/reservations", `{"selection_id":"keep","model_name":"m2","routing_group":"g"}`, nil, 404},
		{"POST", "/reservations", `{}`, nil, 422},
		{"POST", "/reservations", `{"selection_id":7}`, nil, 422},
		// Explicit-form refusals: prefill over isl, no prompt, unknown worker, rank outside the
		// range, incomplete worker, unready partition, duplicate id.
		{"POST", "/reservations", `{"selection_id":"rej-15","worker_id":1,"sequence_hashes":[1],"isl_tokens":4,"effective_prefill_tokens":5}`, nil, 400},
		{"POST", "/reservations", `{"selection_id":"rej-16","worker_id":1}`, nil, 400},
		{"POST", "/reservations", `{"selection_id":"rej-17","worker_id":42,"sequence_hashes":[1],"isl_tokens":4}`, nil, 404},
		{"POST", "/reservations", `{"selection_id":"rej-18","worker_id":1,"dp_rank":2,"sequence_hashes":[1],"isl_tokens":4}`, nil, 404},
		{"POST", "/reservations", `{"selection_id":"rej-19","worker_id":4,"sequence_hashes":[1],"isl_tokens":4}`, nil, 404},
		{"POST", "/reservations", `{"selection_id":"rej-20","model_name":"nope","worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`, nil, 503},
		{"POST", "/reservations", `{"selection_id":"b1","worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`, nil, 409},
		{"POST", "/reservations", `{"selection_id":"rej-21"}`, noCT, 415},
		// Lifecycle refusals; the ones on b1 would otherwise add an output block or decay it.
		{"POST", "/reservations/rej-22/prefill_complete", `{}`, nil, 404},
		{"POST", "/reservations/b1/output_block", `{"decay_fraction":2}`, nil, 400},
		{"POST", "/reservations/b1/output_block", `{"decay_fraction":-0.5}`, nil, 400},
		{"POST", "/reservations/b1/output_block", `{"decay_fraction":"x"}`, nil, 422},
		{"POST", "/reservations/b1/output_block", `{`, nil, 400},
		{"POST", "/reservations/b1/output_block", `null`, nil, 422},
		{"POST", "/reservations/b1/output_block", ``, nil, 415},
		{"POST", "/reservations/b1/output_block", `{}`, textCT, 415},
		{"POST", "/reservations/rej-23/output_block", `{}`, nil, 404},
		{"POST", "/reservations/b1/prefill_complete/", `{}`, nil, 404},
		{"DELETE", "/reservations/rej-24", ``, nil, 404},
		{"DELETE", "/reservations/b1/", ``, nil, 404},
		{"PUT", "/reservations/b1", ``, nil, 405},
		{"GET", "/reservations/b1/output_block", ``, nil, 405},
		// Inspection and peers.
		{"POST", "/potential_loads", `{}`, nil, 400},
		{"POST", "/potential_loads", `{"token_ids":{}}`, nil, 422},
		{"POST", "/potential_loads", `{"model_name":"nope","token_ids":[1]}`, nil, 503},
		{"POST", "/overlap_scores", `{"block_hashes":[1],"sequence_hashes":[1]}`, nil, 400},
		{"POST", "/overlap_scores", `{"token_ids":[1]}`, noCT, 415},
		{"POST", "/overlap_scores", `{"model_name":"nope","token_ids":[1]}`, nil, 503},
		{"POST", "/replica_sync/register_peer", `{"endpoint":"tcp://b:1"}`, nil, 409},
		{"POST", "/replica_sync/deregister_peer", `{"endpoint":"tcp://b:1"}`, nil, 409},
		{"POST", "/replica_sync/register_peer", `{}`, nil, 422},
		{"POST", "/dump", `{}`, nil, 405},
		{"DELETE", "/loads", ``, nil, 405},
		{"GET", "/nope", ``, nil, 404},
	}
}

// newBusyHarness builds the state every rejection runs against.
func newBusyHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	// Two partitions, a two-rank worker, an incomplete worker, a booking with an output block
	// (b1), one past prefill (b2) and a pending selection (keep).
	h.addWorker(worker(1, "", "", 4, `"data_parallel_size":2`))
	h.addWorker(worker(2, "", "", 4, `"taints":["fast"]`))
	h.addWorker(worker(3, "m2", "g", 8))
	h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":4,"endpoint":"http://w4"}`) // incomplete
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"b1","token_ids":`+tokens(0, 16)+`}`)
	h.must(http.StatusOK, "POST", "/reservations/b1/output_block", `{}`)
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"b2","model_name":"m2","routing_group":"g","worker_id":3,"token_ids":`+tokens(0, 24)+`}`)
	h.must(http.StatusOK, "POST", "/reservations/b2/prefill_complete", ``)
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"keep","token_ids":`+tokens(50, 58)+`}`)
	return h
}

// TestBadInputChangesNothing sends every rejected request and compares snapshots around each.
func TestBadInputChangesNothing(t *testing.T) {
	h := newBusyHarness(t)
	// Snapshots are taken around each request, so a failure names the exact request that
	// changed something.
	for _, rj := range badInputs() {
		before := h.snap()
		r := h.doBytes(rj.method, rj.path, []byte(rj.body), rj.hdr...)
		if r.status != rj.status {
			t.Errorf("%s %s %.80s: got %s, want %d", rj.method, rj.path, rj.body, r, rj.status)
		}
		if !bytes.HasPrefix(r.body, []byte(`{"error":`)) {
			t.Errorf("%s %s: body %s is not an error envelope", rj.method, rj.path, r.body)
		}
		if after := h.snap(); after != before {
			t.Fatalf("%s %s %.80s (%d) changed state:\nbefore %+v\nafter  %+v", rj.method, rj.path, rj.body, r.status, before, after)
		}
	}
	// No rejected selection cached anything, and the pre-existing pending selection survived.
	for _, id := range []string{"rej-1", "rej-2", "rej-3", "rej-4", "rej-5", "rej-6", "rej-7"} {
		h.wantError(h.do("POST", "/reservations", `{"selection_id":"`+id+`"}`), http.StatusNotFound, "no pending selection")
	}
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"keep"}`)
}
