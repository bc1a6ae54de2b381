package api_test

// FuzzHTTPDecode feeds arbitrary bodies to the routes that decode outside JSON into requests
// with the most structure: POST /select, /select_and_reserve, /reservations and /workers.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// fuzzRoutes are the fuzzed paths, indexed by the input's route byte.
var fuzzRoutes = []string{"/select", "/select_and_reserve", "/reservations", "/workers"}

// newFuzzService returns a fresh service (so every input reproduces on its own) holding two
// schedulable workers, a booking "b" and a pending selection "p".
func newFuzzService(t *testing.T) *core.Service {
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Clock: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	u64 := func(v uint64) *uint64 { return &v }
	u32 := func(v uint32) *uint32 { return &v }
	str := func(v string) *string { return &v }
	for id := uint64(1); id <= 2; id++ {
		if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: u64(id), Endpoint: str("http://w"), BlockSize: u32(4), DataParallelSize: u32(uint32(id))}); err != nil {
			t.Fatal(err)
		}
	}
	prompt := core.Prompt{TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8}}
	if _, err := svc.SelectAndReserve(&core.SelectRequest{SelectionID: str("b"), Prompt: prompt}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Select(&core.SelectRequest{SelectionID: str("p"), Prompt: prompt}); err != nil {
		t.Fatal(err)
	}
	return svc
}

// FuzzHTTPDecode checks that no body makes a fuzzed route panic or answer 5xx (503 for a
// partition that is not ready is the one allowed), and that every answer is one JSON value,
// an {"error": string} envelope whenever the status is an error. It also checks the strict
// decoder of every request body type against the reference (encoding/json behind an exact-case
// and duplicate-field pre-pass): same verdict (decoded, 400 or 422) and, when decoded, the same
// value. It serves each input through
// the real handler in process (ServeHTTP on a recorder) rather than over a socket, so the fuzzer
// spends its time in decoding and the engine rather than in the network stack.
func FuzzHTTPDecode(f *testing.F) {
	seeds := []string{
		`{"token_ids":[1,2,3,4,5]}`,
		`{"selection_id":"s","model_name":"default","routing_group":"default","token_ids":[1,2,3,4],"session_id":"x","advisory":true}`,
		`{"block_hashes":[-1,2],"sequence_hashes":[3,-9223372036854775808],"isl_tokens":7}`,
		`{"token_ids":[1],"pinned_worker":{"worker_id":2,"dp_rank":1},"routing_constraints":{"required_taints":["a"],"preferred_taints":{"a":0.5}}}`,
		`{"mm_routing_info":{"routing_token_ids":[1,2,3,4],"block_mm_infos":[{"mm_objects":[{"mm_hash":5,"offsets":[[0,2]]}]},null]},"token_ids":[9]}`,
		`{"token_ids":[1,2,3,4],"lora_name":"a","cache_salt":"b","is_eagle":true,"router_config_override":{"router_temperature":0.5,"assume_kv_reuse":false}}`,
		`{"selection_id":"p"}`,
		`{"selection_id":"x","worker_id":2,"dp_rank":1,"sequence_hashes":[1,2],"isl_tokens":9,"effective_prefill_tokens":3,"track_prefill_tokens":false}`,
		`{"selection_id":"b","worker_id":1,"token_ids":[1,2,3,4]}`,
		`{"worker_id":3,"endpoint":"http://w3","block_size":4,"data_parallel_start_rank":4294967295,"data_parallel_size":1}`,
		`{"worker_id":1,"model_name":"m","block_size":8,"taints":["a","a"],"kv_events_endpoints":{"0":"tcp://a:1"},"router_hint_source_control_endpoints":{"1":"x"}}`,
		`{"worker_id":2,"block_size":0,"data_parallel_size":0}`,
		`{"session_context":{"session_id":"s","input_trigger":"tool_result","agent_headers":{"h":["v"]}},"token_ids":[1]}`,
		`null`, `[]`, `{`, `{"token_ids":[4294967296]}`, `{"isl_tokens":1000000,"block_hashes":[],"sequence_hashes":[]}`,
		// Strictness: case, escaped keys, duplicates, and data errors next to syntax errors.
		`{"Worker_ID":3,"endpoint":"http://w3","block_size":4}`, `{"worker\u005fid":3,"worker_id":3}`,
		`{"token_ids":[1,2],"Token_IDs":[3],"token_ids":[4]}`, `{"session_context":{"session_id":"a","session_id":"b"},"token_ids":[1]}`,
		`{"selection_id":"\ud800\udc00\ud800","token_ids":[ 1 ,2, 3]}`, `{"worker_id":"9",}`, `{"worker_id":"9"} x`,
		`{"block_hashes":[-9223372036854775808,9223372036854775807],"sequence_hashes":[1,2],"isl_tokens":8}`,
	}
	for i, s := range seeds {
		for r := range fuzzRoutes {
			if i%len(fuzzRoutes) == r || r == 0 {
				f.Add(uint8(r), []byte(s))
			}
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		if err := api.CompareDecoders(body); err != nil {
			t.Fatal(err)
		}
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		svc := newFuzzService(t)
		defer svc.Close()
		handler := api.New(svc, api.Options{})
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		var v any
		dec := json.NewDecoder(rec.Body)
		if err := dec.Decode(&v); err != nil || dec.More() {
			t.Fatalf("POST %s %q: answer is not one JSON value (%v)", path, body, err)
		}
		if rec.Code >= 400 {
			m, ok := v.(map[string]any)
			if _, isStr := m["error"].(string); !ok || !isStr {
				t.Fatalf("POST %s %q: %d answer %v is not an error envelope", path, body, rec.Code, v)
			}
		}
	})
}

// TestHugeISLDoesNotPoisonRank is the regression test for the known prefill overflow: one
// booking with isl_tokens = 2^64-1 is accepted, after which every booking on that rank answers
// 500 until the first is freed. The engine should reject such an isl_tokens (400) or saturate.
func TestHugeISLDoesNotPoisonRank(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	huge := h.do("POST", "/select_and_reserve", `{"isl_tokens":18446744073709551615,"block_hashes":[],"sequence_hashes":[]}`)
	if huge.status != http.StatusOK && huge.status != http.StatusBadRequest {
		t.Fatalf("huge isl_tokens: %s, want 200 or 400", huge)
	}
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"token_ids":[1,2,3,4]}`)
}
