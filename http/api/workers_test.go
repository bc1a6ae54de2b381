package api_test

// Worker catalog, health and readiness routes (spec §2.2, §2.3, §3): status codes and the exact
// record shape Dynamo clients parse.

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// seedWorker is the seed document's POST /workers example, verbatim.
const seedWorker = `{
  "worker_id": 1,
  "model_name": "model",
  "routing_group": "default",
  "endpoint": "http://worker:8000",
  "block_size": 16,
  "data_parallel_start_rank": 0,
  "data_parallel_size": 2,
  "kv_events_endpoints": {
    "0": "tcp://worker:5557",
    "1": "tcp://worker:5558"
  }
}`

// TestPostWorkerSeedExampleRecord pins the full catalog record of the seed's example: 201, every
// optional scalar present as null, taints [] and topology_domains {} present, kv_events_endpoints
// echoed, not_schedulable_reasons and the router_hint_* / kv_event_source_mode fields omitted,
// and no listeners field since ingestion was never started.
func TestPostWorkerSeedExampleRecord(t *testing.T) {
	// KV events on but never started: the record shows kv_events_endpoints as registered, and
	// no listener state is attached.
	h := newHarnessWith(t, setup{kvEvents: true})
	got := string(h.must(http.StatusCreated, "POST", "/workers", seedWorker))
	want := `{"worker_id":1,"model_name":"model","routing_group":"default","endpoint":"http://worker:8000",` +
		`"kv_events_endpoint":null,"kv_events_endpoints":{"0":"tcp://worker:5557","1":"tcp://worker:5558"},` +
		`"replay_endpoint":null,"block_size":16,"data_parallel_start_rank":0,"data_parallel_size":2,` +
		`"max_num_batched_tokens":null,"total_kv_blocks":null,"stable_routing_id":null,"is_eagle":null,` +
		`"taints":[],"topology_domains":{},"kv_transfer_domain":null,"kv_transfer_enforcement":null,` +
		`"kv_transfer_preferred_weight":null,"lifecycle":"schedulable"}`
	if got != want {
		t.Fatalf("record\n got %s\nwant %s", got, want)
	}
	// The same record is what GET /workers lists.
	if list := string(h.must(http.StatusOK, "GET", "/workers", "")); list != "["+want+"]" {
		t.Fatalf("GET /workers = %s", list)
	}
}

// TestPostWorkerEveryFieldEchoed sets every WorkerRequest field and checks each comes back, with
// taints treated as a sorted set.
func TestPostWorkerEveryFieldEchoed(t *testing.T) {
	h := newHarnessWith(t, setup{kvEvents: true})
	rec := h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":7,"model_name":"m","routing_group":"g",
		"endpoint":"http://w7:8000","kv_events_endpoint":"tcp://w7:5557","replay_endpoint":"tcp://w7:5558",
		"block_size":32,"data_parallel_start_rank":3,"data_parallel_size":1,"max_num_batched_tokens":8192,
		"total_kv_blocks":4096,"stable_routing_id":"stable-7","is_eagle":false,"taints":["gpu-b","gpu-a","gpu-b"],
		"topology_domains":{"zone":"z1"},"kv_transfer_domain":"nvl-1","kv_transfer_enforcement":"preferred",
		"kv_transfer_preferred_weight":0.5,"router_hint_worker_type":"decode",
		"router_hint_source_control_endpoints":{"3":"tcp://w7:5600"},"kv_event_source_mode":"framework_v1"}`)
	// With every field set, the three omitted-when-empty members (router_hint_worker_type,
	// router_hint_source_control_endpoints, kv_event_source_mode) appear too; only
	// kv_events_endpoints stays absent because this worker uses the single kv_events_endpoint
	// and not_schedulable_reasons because it is schedulable.
	wantKeys(t, "record", rec, "worker_id", "model_name", "routing_group", "endpoint", "kv_events_endpoint",
		"replay_endpoint", "block_size", "data_parallel_start_rank", "data_parallel_size", "max_num_batched_tokens",
		"total_kv_blocks", "stable_routing_id", "is_eagle", "taints", "topology_domains", "kv_transfer_domain",
		"kv_transfer_enforcement", "kv_transfer_preferred_weight", "router_hint_worker_type",
		"router_hint_source_control_endpoints", "kv_event_source_mode", "lifecycle")
	for k, want := range map[string]string{"worker_id": "7", "block_size": "32", "data_parallel_start_rank": "3",
		"data_parallel_size": "1", "max_num_batched_tokens": "8192", "total_kv_blocks": "4096", "kv_transfer_preferred_weight": "0.5"} {
		if got := num(rec, k); got != want {
			t.Errorf("%s = %q, want %s", k, got, want)
		}
	}
	for k, want := range map[string]any{"model_name": "m", "routing_group": "g", "endpoint": "http://w7:8000",
		"kv_events_endpoint": "tcp://w7:5557", "replay_endpoint": "tcp://w7:5558", "stable_routing_id": "stable-7",
		"is_eagle": false, "kv_transfer_domain": "nvl-1", "kv_transfer_enforcement": "preferred",
		"router_hint_worker_type": "decode", "kv_event_source_mode": "framework_v1", "lifecycle": "schedulable"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v", k, rec[k], want)
		}
	}
	if got := rec["taints"].([]any); len(got) != 2 || got[0] != "gpu-a" || got[1] != "gpu-b" {
		t.Errorf("taints = %v, want the sorted set [gpu-a gpu-b]", got)
	}
	if got := sub(rec, "topology_domains"); len(got) != 1 || got["zone"] != "z1" {
		t.Errorf("topology_domains = %v", got)
	}
	if got := sub(rec, "router_hint_source_control_endpoints"); len(got) != 1 || got["3"] != "tcp://w7:5600" {
		t.Errorf("router_hint_source_control_endpoints = %v", got)
	}
}

// TestPostWorkerIncompleteReasons checks that validation failures are 201 records with
// lifecycle "incomplete" and Dynamo's reasons in Dynamo's order.
func TestPostWorkerIncompleteReasons(t *testing.T) {
	queue := 0.5
	// Each case isolates one rule of spec §3.4, in its numbered order: metadata checks (1–4),
	// KV-event endpoint checks that apply only with events on (5), partition reconciliation (6)
	// and ZMQ endpoint validation (7). Reasons are matched by prefix because the ZMQ validator's
	// own message follows the prefix.
	cases := []struct {
		name     string
		kvEvents bool
		queueing bool
		prior    string // registered first (must be schedulable)
		body     string
		want     []string
	}{
		{"bare id, events off", false, false, "", `{"worker_id":3}`,
			[]string{"endpoint is required", "block_size must be greater than 0"}},
		{"bare id, events on", true, false, "", `{"worker_id":3}`,
			[]string{"endpoint is required", "block_size must be greater than 0", "kv_events endpoint is required for dp_rank 0"}},
		{"empty endpoint and zero block size", false, false, "", `{"worker_id":3,"endpoint":"","block_size":0}`,
			[]string{"endpoint is required", "block_size must be greater than 0"}},
		{"zero dp size", false, false, "", `{"worker_id":3,"endpoint":"http://w3","block_size":4,"data_parallel_size":0}`,
			[]string{"data_parallel_size must be greater than 0"}},
		{"queueing needs capacity", false, true, "", worker(3, "", "", 4),
			[]string{"max_num_batched_tokens is required while queueing is enabled"}},
		{"missing rank endpoint", true, false, "", worker(3, "", "", 4, `"data_parallel_start_rank":2,"data_parallel_size":2,"kv_events_endpoints":{"2":"tcp://w3:1"}`),
			[]string{"kv_events endpoint is required for dp_rank 3"}},
		{"replay with dp 2", true, false, "", worker(3, "", "", 4, `"data_parallel_size":2,"kv_events_endpoints":{"0":"tcp://w3:1","1":"tcp://w3:2"},"replay_endpoint":"tcp://w3:3"`),
			[]string{"replay_endpoint is supported only for data_parallel_size 1"}},
		{"block size mismatch", false, false, worker(1, "", "", 4), worker(3, "", "", 8),
			[]string{"reconciliation failed: block_size mismatch for model=default routing_group=default: existing=4 requested=8"}},
		{"invalid zmq endpoint", true, false, "", worker(3, "", "", 4, `"kv_events_endpoint":"http://not-zmq"`),
			[]string{"reconciliation failed: invalid kv_events endpoint for worker 3 dp_rank 0: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, setup{kvEvents: tc.kvEvents, edit: func(c *engine.Config) {
				if tc.queueing {
					c.QueueThreshold = &queue
				}
			}})
			if tc.prior != "" {
				h.addWorker(tc.prior)
			}
			rec := h.obj(http.StatusCreated, "POST", "/workers", tc.body)
			if rec["lifecycle"] != "incomplete" {
				t.Fatalf("lifecycle = %v, want incomplete", rec["lifecycle"])
			}
			raw, _ := rec["not_schedulable_reasons"].([]any)
			got := make([]string, len(raw))
			for i, r := range raw {
				got[i], _ = r.(string)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("reasons = %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Fatalf("reason %d = %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
			// An incomplete worker never makes the service ready.
			if tc.prior == "" {
				h.must(http.StatusServiceUnavailable, "GET", "/ready", "")
			}
		})
	}
}

// TestPostWorkerIsUpsert checks that reusing an id replaces the whole record and can move the
// worker to another partition, leaving the old one without a schedulable worker.
func TestPostWorkerIsUpsert(t *testing.T) {
	h := newHarness(t)
	// The first registration sets fields the second omits: an upsert must drop them, not merge.
	h.addWorker(worker(1, "", "", 4, `"taints":["a"],"total_kv_blocks":10`))
	rec := h.addWorker(worker(1, "other", "", 4))
	if rec["model_name"] != "other" || len(rec["taints"].([]any)) != 0 || rec["total_kv_blocks"] != nil {
		t.Fatalf("upsert did not replace the record: %v", rec)
	}
	if n := len(h.arr(http.StatusOK, "GET", "/workers", "")); n != 1 {
		t.Fatalf("GET /workers lists %d records after an upsert of the same id, want 1", n)
	}
	h.wantError(h.do("POST", "/select", `{"token_ids":[1,2,3,4]}`), http.StatusServiceUnavailable,
		"no schedulable workers for model=default routing_group=default")
	h.obj(http.StatusOK, "POST", "/select", `{"model_name":"other","token_ids":[1,2,3,4]}`)
}

// TestPostWorkerRejections covers the 4xx answers of POST /workers.
func TestPostWorkerRejections(t *testing.T) {
	h := newHarness(t)
	// Type and required-field errors are serde's (422); enum and rank-key errors are the ones the
	// engine checks in place of serde (also 422); only broken syntax is 400. The fragment is the
	// field the message must name so a client can tell what to fix.
	cases := []struct {
		name, body string
		status     int
		fragment   string
	}{
		{"missing worker_id", `{"endpoint":"http://w"}`, 422, "worker_id"},
		{"null worker_id", `{"worker_id":null}`, 422, "worker_id"},
		{"negative worker_id", `{"worker_id":-1}`, 422, "worker_id"},
		{"string worker_id", `{"worker_id":"1"}`, 422, "worker_id"},
		{"block_size over u32", `{"worker_id":1,"block_size":4294967296}`, 422, "block_size"},
		{"taints not a list", `{"worker_id":1,"taints":"a"}`, 422, "taints"},
		{"bad rank key", `{"worker_id":1,"kv_events_endpoints":{"x":"tcp://a:1"}}`, 422, "kv_events_endpoints"},
		{"bad enforcement", `{"worker_id":1,"kv_transfer_enforcement":"always"}`, 422, "kv_transfer_enforcement"},
		{"bad source mode", `{"worker_id":1,"kv_event_source_mode":"v3"}`, 422, "kv_event_source_mode"},
		{"malformed", `{"worker_id":1`, 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := h.on(t)
			hs.wantError(hs.do("POST", "/workers", tc.body), tc.status, tc.fragment)
		})
	}
	if n := len(h.arr(http.StatusOK, "GET", "/workers", "")); n != 0 {
		t.Fatalf("rejected registrations left %d records", n)
	}
}

// TestPatchWorker checks 200 with the merged record, wholesale replacement of set fields,
// re-validation (an incomplete worker becomes schedulable), non-patchable identity fields, and
// the 404/400/422 answers.
func TestPatchWorker(t *testing.T) {
	h := newHarness(t)
	rec := h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":2,"endpoint":"http://w2:8000","taints":["a","b"]}`)
	if rec["lifecycle"] != "incomplete" {
		t.Fatalf("setup: %v", rec)
	}
	h.must(http.StatusServiceUnavailable, "GET", "/ready", "")

	rec = h.obj(http.StatusOK, "PATCH", "/workers/2", `{"block_size":4,"taints":["c"],"model_name":"ignored","worker_id":99}`)
	if rec["lifecycle"] != "schedulable" || rec["not_schedulable_reasons"] != nil {
		t.Fatalf("patched record not schedulable: %v", rec)
	}
	if rec["endpoint"] != "http://w2:8000" || num(rec, "block_size") != "4" {
		t.Fatalf("patch lost or missed fields: %v", rec)
	}
	if tt := rec["taints"].([]any); len(tt) != 1 || tt[0] != "c" {
		t.Fatalf("taints = %v, want replaced wholesale by [c]", tt)
	}
	if rec["model_name"] != "default" || num(rec, "worker_id") != "2" {
		t.Fatalf("model_name/worker_id must not be patchable: %v", rec)
	}
	h.must(http.StatusOK, "GET", "/ready", "")

	// An empty patch changes nothing and still answers the record.
	before := string(h.must(http.StatusOK, "GET", "/workers", ""))
	h.must(http.StatusOK, "PATCH", "/workers/2", `{}`)
	if after := string(h.must(http.StatusOK, "GET", "/workers", "")); after != before {
		t.Fatalf("empty PATCH changed the catalog:\n%s\n%s", before, after)
	}

	// The path id is parsed as a u64 before the body is read (axum's Path extractor runs first):
	// anything else is 400 with axum's wording.
	h.wantError(h.do("PATCH", "/workers/9", `{}`), http.StatusNotFound, "worker 9 not found")
	for _, id := range []string{"abc", "-1", "1.5", "18446744073709551616", "%20"} {
		h.wantError(h.do("PATCH", "/workers/"+id, `{}`), http.StatusBadRequest, "Cannot parse", "u64")
	}
	h.wantError(h.do("PATCH", "/workers/2", `{"block_size":"4"}`), http.StatusUnprocessableEntity, "block_size")
	h.wantError(h.do("PATCH", "/workers/2", `{"kv_transfer_enforcement":"x"}`), http.StatusUnprocessableEntity, "kv_transfer_enforcement")
	h.wantError(h.do("PATCH", "/workers/2", `{}`, "Content-Type", ""), http.StatusUnsupportedMediaType)
}

// TestDeleteWorker checks 200 with the final "unschedulable" record, that the worker and its
// bookings are gone, and 404/400 for unknown and non-numeric ids.
func TestDeleteWorker(t *testing.T) {
	h := newHarness(t)
	created := h.addWorker(worker(1, "", "", 4))
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r1","token_ids":[1,2,3,4]}`)

	rec := h.obj(http.StatusOK, "DELETE", "/workers/1", "")
	if rec["lifecycle"] != "unschedulable" {
		t.Fatalf("DELETE record lifecycle = %v, want unschedulable", rec["lifecycle"])
	}
	// Apart from lifecycle, the final record has the same members as the registered one.
	delete(rec, "lifecycle")
	delete(created, "lifecycle")
	wantKeys(t, "deleted record", rec, keys(created)...)
	if n := len(h.arr(http.StatusOK, "GET", "/workers", "")); n != 0 {
		t.Fatalf("deleted worker still listed (%d records)", n)
	}
	for _, p := range h.arr(http.StatusOK, "GET", "/loads", "") {
		if rows := p.(map[string]any)["loads"].([]any); len(rows) != 0 {
			t.Fatalf("GET /loads still has rows after the only worker was deleted: %v", rows)
		}
	}
	// The worker's bookings went with it: their lifecycle calls are unknown ids now.
	h.wantError(h.do("DELETE", "/reservations/r1", ""), http.StatusNotFound, "reservation r1 not found")
	h.wantError(h.do("DELETE", "/workers/1", ""), http.StatusNotFound, "worker 1 not found")
	h.wantError(h.do("DELETE", "/workers/one", ""), http.StatusBadRequest, "Cannot parse `one` to a `u64`")
}

// TestListWorkersFiltersAndSort checks GET /workers ordering by (model_name, routing_group,
// worker_id) and that the two filters are independent.
func TestListWorkersFiltersAndSort(t *testing.T) {
	h := newHarness(t)
	if got := string(h.must(http.StatusOK, "GET", "/workers", "")); got != "[]" {
		t.Fatalf("empty catalog = %s, want []", got)
	}
	h.addWorker(worker(1, "b", "x", 4))
	h.addWorker(worker(5, "a", "y", 4))
	h.addWorker(worker(9, "a", "x", 4))
	h.addWorker(worker(2, "a", "x", 4))
	h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":3,"model_name":"a","routing_group":"x"}`) // incomplete: still listed

	// ids lists the worker ids GET /workers answers, in answer order.
	ids := func(query string) []string {
		var out []string
		for _, r := range h.arr(http.StatusOK, "GET", "/workers"+query, "") {
			out = append(out, num(r.(map[string]any), "worker_id"))
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"2", "3", "9", "5", "1"}},
		{"?model_name=a", []string{"2", "3", "9", "5"}},
		{"?routing_group=x", []string{"2", "3", "9", "1"}},
		{"?model_name=a&routing_group=y", []string{"5"}},
		{"?model_name=b&routing_group=y", nil},
		{"?model_name=nope", nil},
		{"?model_name=", []string{"2", "3", "9", "5", "1"}}, // an empty filter matches everything
	}
	for _, tc := range cases {
		if got := ids(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("GET /workers%s = %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestHealthAndReady checks liveness, readiness 503 → 200 with the lifecycle body, and 503 again
// once the service is shutting down (while /health stays 200).
func TestHealthAndReady(t *testing.T) {
	h := newHarness(t)
	if got := string(h.must(http.StatusOK, "GET", "/health", "")); got != `{"status":"ok"}` {
		t.Fatalf("/health = %s", got)
	}
	if got := string(h.must(http.StatusServiceUnavailable, "GET", "/ready", "")); got != `{"ready":false,"schedulable_workers":0,"workers":[]}` {
		t.Fatalf("/ready on an empty catalog = %s", got)
	}

	h.obj(http.StatusCreated, "POST", "/workers", `{"worker_id":2}`)
	rd := h.obj(http.StatusServiceUnavailable, "GET", "/ready", "")
	wantKeys(t, "/ready", rd, "ready", "schedulable_workers", "workers")
	if rd["ready"] != false || num(rd, "schedulable_workers") != "0" || len(rd["workers"].([]any)) != 1 {
		t.Fatalf("/ready with an incomplete worker = %v", rd)
	}

	h.addWorker(worker(1, "m", "", 4))
	rd = h.obj(http.StatusOK, "GET", "/ready", "")
	if rd["ready"] != true || num(rd, "schedulable_workers") != "1" {
		t.Fatalf("/ready with a schedulable worker = %v", rd)
	}
	ws := rd["workers"].([]any)
	if len(ws) != 2 || ws[0].(map[string]any)["model_name"] != "default" || ws[1].(map[string]any)["lifecycle"] != "schedulable" {
		t.Fatalf("/ready workers = %v, want every record in catalog order", ws)
	}

	// Shutting down: readiness drops at once, liveness does not, and new work is refused with
	// Dynamo's shutdown message.
	if err := h.svc.Close(); err != nil {
		t.Fatal(err)
	}
	rd = h.obj(http.StatusServiceUnavailable, "GET", "/ready", "")
	if rd["ready"] != false || num(rd, "schedulable_workers") != "1" {
		t.Fatalf("/ready while shutting down = %v", rd)
	}
	h.must(http.StatusOK, "GET", "/health", "")
	h.wantError(h.do("POST", "/select", `{"model_name":"m","token_ids":[1,2,3,4]}`), http.StatusServiceUnavailable, "selection service is shutting down")
	h.wantError(h.do("POST", "/workers", worker(4, "", "", 4)), http.StatusServiceUnavailable, "shutting down")
}
