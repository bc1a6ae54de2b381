package api_test

// POST /reservations (replay and explicit forms) and the reservation lifecycle routes
// (spec §2.6, §2.7, §7.2).

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestReservationReplay checks the cached replay form: 201 with the exact body, single use (then
// 404 "no pending selection"), partition scoping, pure replay of what /select captured, latest
// select wins, and the 120 s pending window measured on the service clock.
func TestReservationReplay(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))

	sel := h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"select-123","model_name":"default","routing_group":"default","token_ids":`+tokens(0, 16)+`}`)
	// A miss in another partition does not consume the entry.
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"select-123","model_name":"other"}`), http.StatusNotFound,
		"no pending selection select-123 for model=other routing_group=default")
	// Pure replay: the prompt below is ignored; the booking is what /select captured.
	got := string(h.must(http.StatusCreated, "POST", "/reservations",
		`{"selection_id":"select-123","model_name":"default","routing_group":"default","token_ids":[9],"expected_output_tokens":1}`))
	want := fmt.Sprintf(`{"selection_id":"select-123","model_name":"default","routing_group":"default","worker_id":%s,"dp_rank":%s,"endpoint":"http://w1:8000"}`,
		num(sel, "worker_id"), num(sel, "dp_rank"))
	if got != want {
		t.Fatalf("replay body\n got %s\nwant %s", got, want)
	}
	if l := h.loadOf("default", "default", 1, 0); l != (load{"1", "4", "16"}) {
		t.Fatalf("load after replaying a 16-token selection = %+v, want (1,4,16)", l)
	}
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"select-123"}`), http.StatusNotFound,
		"no pending selection select-123", "(expired, already used, or never selected)")
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"never"}`), http.StatusNotFound, "no pending selection never")

	// Latest /select for an id wins.
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"s2","token_ids":`+tokens(100, 116)+`}`)
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"s2","token_ids":[7,7,7,7,7]}`)
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"s2"}`)
	if l := h.loadOf("default", "default", 1, 0); l != (load{"2", "5", "21"}) {
		t.Fatalf("load after replaying the latest 5-token selection = %+v, want (2,5,21)", l)
	}

	// The pending window is 120 s of service time: an entry exactly 120 s old is still live
	// (the cutoff is strictly older), one second more and it is gone.
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"fresh","token_ids":[1,2,3,4]}`)
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"stale","token_ids":[1,2,3,4]}`)
	h.clock.Advance(120 * time.Second)
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"fresh"}`)
	h.clock.Advance(time.Second)
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"stale"}`), http.StatusNotFound, "no pending selection stale")
}

// TestReservationReplayRetryable checks that a replay that fails before booking keeps its
// entry, so the same call succeeds once the condition clears: a cached rank that left the
// worker's DP range (404) and a partition without schedulable workers (503).
func TestReservationReplayRetryable(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4, `"data_parallel_size":2`))
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"r","token_ids":[1,2,3,4],"pinned_worker":{"worker_id":1,"dp_rank":1}}`)
	h.obj(http.StatusOK, "PATCH", "/workers/1", `{"data_parallel_size":1}`)
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"r"}`), http.StatusNotFound, "schedulable worker 1 (dp_rank 1) not found")
	h.obj(http.StatusOK, "PATCH", "/workers/1", `{"data_parallel_size":2}`)
	resp := h.obj(http.StatusCreated, "POST", "/reservations", `{"selection_id":"r"}`)
	if num(resp, "dp_rank") != "1" {
		t.Fatalf("retried replay booked %v, want dp_rank 1", resp)
	}

	// A partition that is not ready is 503 and also keeps the entry (spec §2.6).
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"q","token_ids":[1,2,3,4]}`)
	h.obj(http.StatusOK, "PATCH", "/workers/1", `{"endpoint":""}`)
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"q"}`), http.StatusServiceUnavailable, "no schedulable workers")
	h.obj(http.StatusOK, "PATCH", "/workers/1", `{"endpoint":"http://w1:8000"}`)
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"q"}`)
}

// seedExplicit is the seed document's explicit reservation example.
const seedExplicit = `{
  "selection_id": "request-123",
  "model_name": "model",
  "routing_group": "default",
  "worker_id": 1,
  "dp_rank": 0,
  "sequence_hashes": [21, 22, 23, 24, 25, 26, 27, 28],
  "isl_tokens": 512,
  "effective_prefill_tokens": 384,
  "track_prefill_tokens": true
}`

// TestReservationExplicit checks the explicit form: the seed example's 201 body and load, the
// prefill-tracking decision, that it discards a cached selection, and its 400/404/409/503s.
func TestReservationExplicit(t *testing.T) {
	h := newHarness(t)
	// Block size 16 as in the seed; the prompt is 8 hashes for 512 tokens and the booking
	// carries its own effective_prefill_tokens, so /loads shows 8 blocks and 384 tokens.
	h.addWorker(worker(1, "model", "", 16, `"data_parallel_size":2`))
	got := string(h.must(http.StatusCreated, "POST", "/reservations", seedExplicit))
	if want := `{"selection_id":"request-123","model_name":"model","routing_group":"default","worker_id":1,"dp_rank":0,"endpoint":"http://w1:8000"}`; got != want {
		t.Fatalf("explicit body\n got %s\nwant %s", got, want)
	}
	if l := h.loadOf("model", "default", 1, 0); l != (load{"1", "8", "384"}) {
		t.Fatalf("load after the seed's explicit booking = %+v, want (1,8,384)", l)
	}
	h.wantError(h.do("POST", "/reservations", seedExplicit), http.StatusConflict, "selection request-123 is already reserved or being reserved")

	// Prefill tracking: config default (whole isl, nothing cached on rank 1), explicit false.
	cases := []struct {
		id, extra, wantPrefill string
	}{
		{"cfg", ``, "100"},
		{"off", `,"effective_prefill_tokens":40,"track_prefill_tokens":false`, "0"},
		{"hint", `,"effective_prefill_tokens":40`, "40"},
	}
	for _, tc := range cases {
		body := fmt.Sprintf(`{"selection_id":%q,"model_name":"model","worker_id":1,"dp_rank":1,"sequence_hashes":[1],"isl_tokens":100%s}`, tc.id, tc.extra)
		h.must(http.StatusCreated, "POST", "/reservations", body)
		if l := h.loadOf("model", "default", 1, 1); l.prefillTokens != tc.wantPrefill {
			t.Fatalf("%s: potential_prefill_tokens = %s, want %s", tc.id, l.prefillTokens, tc.wantPrefill)
		}
		h.must(http.StatusOK, "DELETE", "/reservations/"+tc.id, "")
	}

	// The explicit form discards the cached selection of its id.
	h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"x","model_name":"model","token_ids":`+tokens(0, 32)+`}`)
	h.must(http.StatusCreated, "POST", "/reservations", `{"selection_id":"x","model_name":"model","worker_id":1,"sequence_hashes":[5],"isl_tokens":16}`)
	h.must(http.StatusOK, "DELETE", "/reservations/x", "")
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"x","model_name":"model"}`), http.StatusNotFound, "no pending selection x")

	// Every refusal of the explicit form, plus the 422s shared with the replay form. A missing
	// selection_id must be named in the message (spec §2.0).
	rejections := []struct {
		name, body string
		status     int
		fragments  []string
	}{
		{"prefill over isl", `{"selection_id":"e1","model_name":"model","worker_id":1,"sequence_hashes":[1],"isl_tokens":512,"effective_prefill_tokens":600}`,
			400, []string{"effective_prefill_tokens (600) must not exceed isl_tokens (512)"}},
		{"no prompt", `{"selection_id":"e2","model_name":"model","worker_id":1}`, 400, []string{"sequence_hashes is required without token_ids"}},
		{"unknown worker", `{"selection_id":"e3","model_name":"model","worker_id":9,"sequence_hashes":[1],"isl_tokens":4}`,
			404, []string{"schedulable worker 9 not found for model=model routing_group=default"}},
		{"rank outside range", `{"selection_id":"e4","model_name":"model","worker_id":1,"dp_rank":5,"sequence_hashes":[1],"isl_tokens":4}`,
			404, []string{"schedulable worker 1 (dp_rank 5) not found"}},
		{"partition not ready", `{"selection_id":"e5","worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`,
			503, []string{"no schedulable workers for model=default routing_group=default"}},
		{"missing selection_id, replay form", `{"model_name":"model"}`, 422, []string{"selection_id"}},
		{"missing selection_id, explicit form", `{"model_name":"model","worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`, 422, []string{"selection_id"}},
		{"null selection_id", `{"selection_id":null}`, 422, []string{"selection_id"}},
		{"numeric selection_id", `{"selection_id":5}`, 422, []string{"selection_id"}},
		{"negative prefill", `{"selection_id":"e6","worker_id":1,"effective_prefill_tokens":-1}`, 422, []string{"effective_prefill_tokens"}},
		{"bad override", `{"selection_id":"e7","router_config_override":{"prefill_load_scale":-1}}`, 422, []string{"prefill_load_scale"}},
	}
	for _, tc := range rejections {
		t.Run(tc.name, func(t *testing.T) {
			hs := h.on(t)
			hs.wantError(hs.do("POST", "/reservations", tc.body), tc.status, tc.fragments...)
		})
	}
}

// TestReservationLifecycleRoutes checks prefill_complete, output_block and DELETE: 200
// {"status":"ok"}, idempotent prefill_complete, decay_fraction validated before the lookup,
// and 404 for unknown or freed reservations.
func TestReservationLifecycleRoutes(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r1","token_ids":[1,2,3,4]}`)

	// Every accepted lifecycle call answers exactly Dynamo's payload-less success body. The
	// output_block bodies cover {}, an explicit null fraction, both bounds and unknown members.
	ok := `{"status":"ok"}`
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/reservations/r1/prefill_complete", ``},
		{"POST", "/reservations/r1/prefill_complete", `{}`}, // repeating is harmless
		{"POST", "/reservations/r1/output_block", `{}`},
		{"POST", "/reservations/r1/output_block", `{"decay_fraction":null}`},
		{"POST", "/reservations/r1/output_block", `{"decay_fraction":0.0}`},
		{"POST", "/reservations/r1/output_block", `{"decay_fraction":1}`},
		{"POST", "/reservations/r1/output_block", `{"decay_fraction":0.25,"unknown":true}`},
	} {
		if got := string(h.must(http.StatusOK, req.method, req.path, req.body)); got != ok {
			t.Fatalf("%s %s %s = %s", req.method, req.path, req.body, got)
		}
	}
	// prefill_complete ignores its body whatever it is.
	h.must(http.StatusOK, "POST", "/reservations/r1/prefill_complete", "not json", "Content-Type", "text/plain")

	// decay_fraction is range-checked before the reservation is looked up, so an unknown id
	// with a bad fraction is 400, not 404.
	for _, id := range []string{"r1", "nope"} {
		for _, f := range []string{"-0.1", "1.0000001", "2", "-1e300"} {
			h.wantError(h.do("POST", "/reservations/"+id+"/output_block", `{"decay_fraction":`+f+`}`),
				http.StatusBadRequest, "decay_fraction must be between 0.0 and 1.0")
		}
	}
	h.wantError(h.do("POST", "/reservations/r1/output_block", `{"decay_fraction":"half"}`), http.StatusUnprocessableEntity, "decay_fraction")
	h.wantError(h.do("POST", "/reservations/r1/output_block", ``, "Content-Type", "application/json"), http.StatusBadRequest)
	h.wantError(h.do("POST", "/reservations/r1/output_block", `{}`, "Content-Type", ""), http.StatusUnsupportedMediaType)

	h.wantError(h.do("POST", "/reservations/nope/prefill_complete", ""), http.StatusNotFound, "reservation nope not found")
	h.wantError(h.do("POST", "/reservations/nope/output_block", `{}`), http.StatusNotFound, "reservation nope not found")
	h.wantError(h.do("DELETE", "/reservations/nope", ""), http.StatusNotFound, "reservation nope not found")

	if got := string(h.must(http.StatusOK, "DELETE", "/reservations/r1", "")); got != ok {
		t.Fatalf("DELETE = %s", got)
	}
	h.wantError(h.do("DELETE", "/reservations/r1", ""), http.StatusNotFound, "reservation r1 not found")
	h.wantError(h.do("POST", "/reservations/r1/prefill_complete", ""), http.StatusNotFound, "reservation r1 not found")
	h.wantError(h.do("POST", "/reservations/r1/output_block", `{}`), http.StatusNotFound, "reservation r1 not found")

	// Ids are path segments: escaped spaces, slashes and percent signs round-trip, as with axum,
	// which routes on the escaped path and unescapes parameters.
	for _, c := range []struct{ id, escaped string }{
		{"a b", "a%20b"}, {"tenant/req-1", "tenant%2Freq-1"}, {"50%/x", "50%25%2Fx"}, {"é", "%C3%A9"},
	} {
		h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"`+c.id+`","token_ids":[1,2,3,4]}`)
		h.must(http.StatusOK, "POST", "/reservations/"+c.escaped+"/prefill_complete", "")
		h.must(http.StatusOK, "POST", "/reservations/"+c.escaped+"/output_block", "{}")
		h.must(http.StatusOK, "DELETE", "/reservations/"+c.escaped, "")
		h.wantError(h.do("DELETE", "/reservations/"+c.escaped, ""), http.StatusNotFound, "reservation "+c.id+" not found")
	}
	// An escaped digit is still a worker id; an escaped path separator is not a route.
	h.addWorker(worker(7, "", "", 4))
	h.obj(http.StatusOK, "PATCH", "/workers/%37", `{}`)
	h.wantError(h.do("GET", "/work%65rs", ""), http.StatusNotFound, "route not found")
	h.wantError(h.do("GET", "/workers%2F", ""), http.StatusNotFound, "route not found")
}
