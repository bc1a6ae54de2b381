package api_test

// The two client flows the seed document describes, step by step, with GET /loads checked after
// every call against the spec's numbers (§6: booking 4 tokens with block size 4 shows
// active_requests=1, potential_decode_blocks=1, potential_prefill_tokens=4; after
// prefill_complete (1,1,0); after free (0,0,0)).

import (
	"net/http"
	"strings"
	"testing"
)

// flowStep is one call of a flow and the chosen rank's load after it.
type flowStep struct {
	name, method, path, body string
	status                   int
	want                     load
}

// runFlow opens with one selection (firstPath, firstBody) against a two-worker fleet, then runs
// steps, checking after each that the load sits on the chosen worker only. The opening response
// names the chosen worker and the selection id (generated for select_and_reserve) that later
// paths reference through the {id} placeholder.
func runFlow(t *testing.T, firstPath, firstBody string, steps []flowStep) {
	t.Helper()
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	h.addWorker(worker(2, "", "", 4))
	idle := load{"0", "0", "0"}

	resp := h.obj(http.StatusOK, "POST", firstPath, firstBody)
	chosen := uint64(1)
	if num(resp, "worker_id") == "2" {
		chosen = 2
	}
	other := 3 - chosen
	id, _ := resp["selection_id"].(string)
	for _, st := range steps {
		path := strings.ReplaceAll(st.path, "{id}", id)
		h.must(st.status, st.method, path, st.body)
		if got := h.loadOf("default", "default", chosen, 0); got != st.want {
			t.Fatalf("after %s: chosen worker load (requests, decode blocks, prefill tokens) = %+v, want %+v", st.name, got, st.want)
		}
		if got := h.loadOf("default", "default", other, 0); got != idle {
			t.Fatalf("after %s: the other worker's load = %+v, want idle", st.name, got)
		}
	}
}

// TestRayFlow is the select-then-reserve flow: /select with an id books nothing, the replayed
// reservation books exactly the spec's (1,1,4), prefill_complete clears the prefill, an output
// block adds one decode block, DELETE frees everything, and the id is then unknown.
func TestRayFlow(t *testing.T) {
	runFlow(t, "/select", `{"selection_id":"ray-1","token_ids":[1,2,3,4]}`, []flowStep{
		{"a second /select", "POST", "/select", `{"token_ids":[1,2,3,4]}`, 200, load{"0", "0", "0"}},
		{"reservation replay", "POST", "/reservations", `{"selection_id":"ray-1","model_name":"default","routing_group":"default"}`, 201, load{"1", "1", "4"}},
		{"prefill_complete", "POST", "/reservations/{id}/prefill_complete", `{}`, 200, load{"1", "1", "0"}},
		{"output_block", "POST", "/reservations/{id}/output_block", `{}`, 200, load{"1", "2", "0"}},
		{"DELETE", "DELETE", "/reservations/{id}", ``, 200, load{"0", "0", "0"}},
		{"late prefill_complete", "POST", "/reservations/{id}/prefill_complete", `{}`, 404, load{"0", "0", "0"}},
		{"second replay", "POST", "/reservations", `{"selection_id":"ray-1"}`, 404, load{"0", "0", "0"}},
	})
}

// TestEPPFlow is the endpoint-picker flow: select_and_reserve books (1,1,4) under a generated
// id, prefill_complete leaves (1,1,0), DELETE leaves (0,0,0).
func TestEPPFlow(t *testing.T) {
	runFlow(t, "/select_and_reserve", `{"token_ids":[1,2,3,4]}`, []flowStep{
		{"a /select", "POST", "/select", `{"token_ids":[1,2,3,4]}`, 200, load{"1", "1", "4"}},
		{"prefill_complete", "POST", "/reservations/{id}/prefill_complete", ``, 200, load{"1", "1", "0"}},
		{"DELETE", "DELETE", "/reservations/{id}", ``, 200, load{"0", "0", "0"}},
		{"second DELETE", "DELETE", "/reservations/{id}", ``, 404, load{"0", "0", "0"}},
	})
}
