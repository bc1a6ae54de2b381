package api_test

// serde's field rules, end to end over a real socket: names match case-sensitively (a field
// whose case differs is an unknown field and is ignored), and a field given twice is 422
// "duplicate field `x`" on every route that takes a JSON body. Neither kind of request may
// change state.

import (
	"net/http"
	"strings"
	"testing"
)

// TestFieldNamesAreCaseSensitive checks that case-mangled names never bind: a worker
// registered as {"Worker_ID":1} has no worker_id (422, nothing registered), and a select whose
// only prompt is under "Token_IDs" has no prompt (400).
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	h := newHarness(t)
	before := h.snap()
	for _, body := range []string{
		`{"Worker_ID":1,"endpoint":"http://w1","block_size":4}`,
		`{"WORKER_ID":1,"endpoint":"http://w1","block_size":4}`,
		`{"worker_iD":1,"endpoint":"http://w1","block_size":4}`,
	} {
		h.wantError(h.do("POST", "/workers", body), http.StatusUnprocessableEntity, "missing field `worker_id`")
	}
	if after := h.snap(); after != before {
		t.Fatalf("a case-mangled worker_id registered a worker:\n%+v", after)
	}
	// Case-mangled optional fields are ignored: the worker registers without them.
	rec := h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":1,"endpoint":"http://w1","block_size":4,"Total_KV_Blocks":5,"TAINTS":["x"]}`)
	if rec["total_kv_blocks"] != nil || len(rec["taints"].([]any)) != 0 {
		t.Fatalf("case-mangled optional fields were bound: %v", rec)
	}
	h.wantError(h.do("POST", "/select", `{"Token_IDs":[1,2,3,4]}`), http.StatusBadRequest)
	// An escaped key is the same name once unescaped (JSON's rule, serde's and encoding/json's).
	h.obj(http.StatusOK, "POST", "/select", `{"token\u005fids":[1,2,3,4]}`)
}

// TestDuplicateFieldsRejected sends a body with one field twice to every JSON route: 422 with
// serde's message, and nothing changes.
func TestDuplicateFieldsRejected(t *testing.T) {
	h := newDecodeHarness(t)
	dups := map[string]string{
		"/workers":                        `{"worker_id":7,"worker_id":8,"endpoint":"http://w","block_size":4}`,
		"/workers/1":                      `{"total_kv_blocks":100,"total_kv_blocks":200}`,
		"/select":                         `{"token_ids":[1,2,3,4],"token_ids":[5,6,7,8]}`,
		"/select_and_reserve":             `{"selection_id":"d1","selection_id":"d2","token_ids":[1,2,3,4]}`,
		"/reservations":                   `{"selection_id":"fresh","worker_id":1,"worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`,
		"/reservations/r1/output_block":   `{"decay_fraction":0.5,"decay_fraction":0.5}`,
		"/potential_loads":                `{"token_ids":[1,2,3,4],"model_name":"default","model_name":"default"}`,
		"/overlap_scores":                 `{"block_hashes":[1],"sequence_hashes":[1],"block_hashes":[2]}`,
		"/replica_sync/register_peer":     `{"endpoint":"tcp://b:9092","endpoint":"tcp://c:9092"}`,
		"/replica_sync/deregister_peer":   `{"endpoint":"tcp://b:9092","endpoint":"tcp://b:9092"}`,
		"/select#nested":                  `{"token_ids":[1],"pinned_worker":{"worker_id":1,"dp_rank":0,"worker_id":1}}`,
		"/select_and_reserve#nested":      `{"token_ids":[1],"router_config_override":{"router_temperature":0,"router_temperature":1}}`,
		"/select#session_context":         `{"token_ids":[1],"session_context":{"session_id":"a","session_id":"a"}}`,
		"/reservations#prompt_and_header": `{"selection_id":"x","selection_id":"x"}`,
	}
	for _, rt := range jsonRoutes {
		found := false
		for key, body := range dups {
			path, _, _ := strings.Cut(key, "#")
			if path != rt.path {
				continue
			}
			found = true
			hs := h.on(t)
			before := hs.snap()
			hs.wantError(hs.do(rt.method, rt.path, body), http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: ", "duplicate field `")
			if after := hs.snap(); after != before {
				t.Fatalf("%s %s with a duplicate field changed state", rt.method, rt.path)
			}
			// The same body without the repetition is accepted or refused for other reasons,
			// never as a duplicate: the 422 above came from the repetition.
			if r := hs.do(rt.method, rt.path, rt.valid); r.status != rt.okStatus && strings.Contains(string(r.body), "duplicate") {
				t.Fatalf("%s %s: the valid body is reported as a duplicate: %s", rt.method, rt.path, r)
			}
		}
		if !found {
			t.Errorf("no duplicate-field case for %s %s", rt.method, rt.path)
		}
	}
	// Repeated unknown fields are not duplicates: they are ignored like any unknown field.
	h.obj(http.StatusOK, "POST", "/select", `{"x":1,"x":2,"token_ids":[1,2,3,4]}`)
}
