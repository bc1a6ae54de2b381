package api_test

// Inspection routes (spec §2.8) and replica-sync peer management (§2.9).

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

var loadRowKeys = []string{"worker_id", "dp_rank", "potential_prefill_tokens", "potential_decode_blocks", "active_requests"}

// TestLoads checks GET /loads: [] before any partition, one element per partition sorted by
// (model_name, routing_group) with Dynamo's members (and kvselect's prefill_speeds), one row per
// rank, and independent filters.
func TestLoads(t *testing.T) {
	h := newHarness(t)
	if got := string(h.must(http.StatusOK, "GET", "/loads", "")); got != "[]" {
		t.Fatalf("GET /loads on an empty service = %s, want []", got)
	}
	h.addWorker(worker(1, "b", "x", 4))
	h.addWorker(worker(2, "a", "y", 4, `"data_parallel_start_rank":2,"data_parallel_size":2`))
	h.addWorker(worker(3, "a", "x", 4))

	// parts checks every member of every partition and row, then summarises each partition as
	// "model:group/rows" in answer order.
	parts := func(query string) []string {
		var out []string
		for _, p := range h.arr(http.StatusOK, "GET", "/loads"+query, "") {
			pm := p.(map[string]any)
			// Dynamo's members, plus kvselect's prefill_speeds (one row per rank, in the order of
			// loads) and queue_order (nothing learned yet: no sample, arrival order).
			wantKeys(t, "partition loads", pm, "model_name", "routing_group", "loads", "pending_count", "pending_isl_tokens", "prefill_speeds", "queue_order")
			if qo := pm["queue_order"].(map[string]any); num(qo, "samples") != "0" || qo["reordered"] != false || num(qo, "overtaken_share") != "0" {
				t.Fatalf("queue_order before any completion: %v", qo)
			}
			speeds, rows := pm["prefill_speeds"].([]any), pm["loads"].([]any)
			if len(speeds) != len(rows) {
				t.Fatalf("%d prefill_speeds rows for %d load rows", len(speeds), len(rows))
			}
			for i, sp := range speeds {
				sm, lm := sp.(map[string]any), rows[i].(map[string]any)
				wantKeys(t, "prefill speed row", sm, "worker_id", "dp_rank", "ms_per_token", "ms_per_token_squared", "overhead_ms", "ms_per_token_context_token", "samples", "confidence")
				if num(sm, "worker_id") != num(lm, "worker_id") || num(sm, "dp_rank") != num(lm, "dp_rank") || num(sm, "samples") != "0" {
					t.Fatalf("prefill speed row %d = %v for load row %v", i, sm, lm)
				}
			}
			if num(pm, "pending_count") != "0" || num(pm, "pending_isl_tokens") != "0" {
				t.Fatalf("pending queue not empty with queueing off: %v", pm)
			}
			for _, l := range pm["loads"].([]any) {
				wantKeys(t, "load row", l.(map[string]any), loadRowKeys...)
			}
			out = append(out, pm["model_name"].(string)+":"+pm["routing_group"].(string)+"/"+strconv.Itoa(len(pm["loads"].([]any))))
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"a:x/1", "a:y/2", "b:x/1"}},
		{"?model_name=a", []string{"a:x/1", "a:y/2"}},
		{"?routing_group=x", []string{"a:x/1", "b:x/1"}},
		{"?model_name=a&routing_group=y", []string{"a:y/2"}},
		{"?model_name=c", nil},
	}
	for _, tc := range cases {
		if got := parts(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("GET /loads%s = %v, want %v", tc.query, got, tc.want)
		}
	}
	if l := h.loadOf("a", "y", 2, 3); l != (load{"0", "0", "0"}) {
		t.Fatalf("idle rank load = %+v", l)
	}
}

// TestPotentialLoads checks POST /potential_loads: one row per schedulable rank with the prompt's
// projected prefill and decode load on top of active load, where blocks already cached and
// active on a rank cost nothing more.
func TestPotentialLoads(t *testing.T) {
	h := newHarness(t)
	h.wantError(h.do("POST", "/potential_loads", `{"token_ids":[1,2,3,4]}`), http.StatusServiceUnavailable, "no schedulable workers")
	h.addWorker(worker(1, "", "", 4))
	h.addWorker(worker(2, "", "", 4))
	prompt := `{"token_ids":` + tokens(0, 16) + `}`

	// rows reads /potential_loads as (requests, decode blocks, prefill tokens) per
	// "worker/rank", checking each row's members.
	rows := func() map[string]load {
		out := map[string]load{}
		for _, r := range h.arr(http.StatusOK, "POST", "/potential_loads", prompt) {
			rm := r.(map[string]any)
			wantKeys(t, "potential load", rm, loadRowKeys...)
			out[num(rm, "worker_id")+"/"+num(rm, "dp_rank")] = load{num(rm, "active_requests"), num(rm, "potential_decode_blocks"), num(rm, "potential_prefill_tokens")}
		}
		return out
	}
	// Idle: every rank would take all 16 tokens of prefill and 4 new blocks.
	want := map[string]load{"1/0": {"0", "4", "16"}, "2/0": {"0", "4", "16"}}
	if got := rows(); !mapsEqual(got, want) {
		t.Fatalf("idle potential loads = %v, want %v", got, want)
	}
	booked := h.obj(http.StatusOK, "POST", "/select_and_reserve", prompt)
	w := num(booked, "worker_id")
	other := map[string]string{"1": "2", "2": "1"}[w]
	// The booked rank: 16 active prefill tokens + 0 uncached; 4 active blocks + 0 new ones.
	want = map[string]load{w + "/0": {"1", "4", "16"}, other + "/0": {"0", "4", "16"}}
	if got := rows(); !mapsEqual(got, want) {
		t.Fatalf("potential loads after booking on %s = %v, want %v", w, got, want)
	}
	// Projection is read-only.
	before := h.snap()
	rows()
	h.must(http.StatusOK, "POST", "/overlap_scores", prompt)
	if after := h.snap(); after != before {
		t.Fatalf("projection changed state:\n%+v\n%+v", before, after)
	}
	h.wantError(h.do("POST", "/potential_loads", `{}`), http.StatusBadRequest, "block_hashes is required without token_ids")
	h.wantError(h.do("POST", "/potential_loads", `{"token_ids":"x"}`), http.StatusUnprocessableEntity, "token_ids")
	h.wantError(h.do("POST", "/potential_loads", `{"model_name":"m","token_ids":[1]}`), http.StatusServiceUnavailable, "no schedulable workers for model=m")
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestOverlapScores pins POST /overlap_scores: a row for every schedulable rank even at zero
// overlap, sorted by (worker_id, dp_rank), cumulative tiers, null shared_beyond_device_blocks
// and the disabled shared-cache object.
func TestOverlapScores(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(2, "", "", 4, `"data_parallel_size":2`))
	h.addWorker(worker(1, "", "", 4))
	prompt := `{"token_ids":` + tokens(0, 18) + `}`
	// zero is the exact text of a row without hits.
	zero := func(w, r string) string {
		return `{"worker_id":` + w + `,"dp_rank":` + r + `,"device_blocks":0,"host_pinned_blocks":0,"disk_blocks":0,` +
			`"host_pinned_extension_blocks":0,"disk_extension_blocks":0,"shared_beyond_device_blocks":null,"router_credit_blocks":0}`
	}
	shared := `"shared_cache":{"enabled":false,"total_hit_blocks":0,"ranges":[],"error":null}`
	got := string(h.must(http.StatusOK, "POST", "/overlap_scores", prompt))
	want := `{"block_size":4,"num_blocks":4,"workers":[` + zero("1", "0") + "," + zero("2", "0") + "," + zero("2", "1") + `],` + shared + `}`
	if got != want {
		t.Fatalf("overlap_scores on an empty index\n got %s\nwant %s", got, want)
	}

	// Book 2 of the prompt's 4 blocks on worker 2 rank 1: its row shows 2 device blocks, the
	// cumulative tiers repeat them, and the credit is 1.0 per device block.
	booked := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"token_ids":`+tokens(0, 8)+`,"pinned_worker":{"worker_id":2,"dp_rank":1}}`)
	if num(booked, "worker_id") != "2" {
		t.Fatalf("pinned booking landed on %v", booked)
	}
	res := h.obj(http.StatusOK, "POST", "/overlap_scores", prompt)
	rows := res["workers"].([]any)
	if len(rows) != 3 {
		t.Fatalf("rows = %v", rows)
	}
	hit := rows[2].(map[string]any)
	for k, v := range map[string]string{"worker_id": "2", "dp_rank": "1", "device_blocks": "2", "host_pinned_blocks": "2",
		"disk_blocks": "2", "host_pinned_extension_blocks": "0", "disk_extension_blocks": "0", "router_credit_blocks": "2"} {
		if num(hit, k) != v {
			t.Fatalf("row with hits: %s = %v, want %s (%v)", k, hit[k], v, hit)
		}
	}
	if hit["shared_beyond_device_blocks"] != nil {
		t.Fatalf("shared_beyond_device_blocks = %v, want null", hit["shared_beyond_device_blocks"])
	}
	for _, r := range rows[:2] {
		rm := r.(map[string]any)
		if num(rm, "device_blocks") != "0" || num(rm, "router_credit_blocks") != "0" || len(rm) != 9 {
			t.Fatalf("row without hits = %v", rm)
		}
	}
	h.wantError(h.do("POST", "/overlap_scores", `{"block_hashes":[1]}`), http.StatusBadRequest, "sequence_hashes is required")
	h.wantError(h.do("POST", "/overlap_scores", `{"model_name":"m","token_ids":[1]}`), http.StatusServiceUnavailable, "no schedulable workers for model=m")
}

// TestDump checks GET /dump: valid JSON, "{}" with no partition, one "model:group" key per
// partition with its block size, and RouterEvents of Dynamo's recovery shape.
func TestDump(t *testing.T) {
	h := newHarness(t)
	if got := string(h.must(http.StatusOK, "GET", "/dump", "")); got != "{}" {
		t.Fatalf("empty dump = %s", got)
	}
	// A model name containing ':' still yields "<model>:<group>" keys (split on the last ':'
	// by readers that need to).
	h.addWorker(worker(1, "a", "x", 4))
	h.addWorker(worker(2, "model:v2", "", 16))
	if got := string(h.must(http.StatusOK, "GET", "/dump", "")); got != `{"a:x":{"block_size":4,"events":[]},"model:v2:default":{"block_size":16,"events":[]}}` {
		t.Fatalf("dump without bookings = %s", got)
	}
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"model_name":"a","routing_group":"x","token_ids":`+tokens(0, 8)+`}`)
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"model_name":"model:v2","token_ids":`+tokens(0, 16)+`}`)

	// Walk every RouterEvent and check the recovery format's members at each level.
	d := h.obj(http.StatusOK, "GET", "/dump", "")
	wantKeys(t, "dump", d, "a:x", "model:v2:default")
	counts := map[string]int{}
	for key, part := range d {
		pm := part.(map[string]any)
		wantKeys(t, key, pm, "block_size", "events")
		for _, ev := range pm["events"].([]any) {
			em := ev.(map[string]any)
			wantKeys(t, "router event", em, "worker_id", "storage_tier", "event")
			if em["storage_tier"] != "device" {
				t.Fatalf("storage_tier = %v", em["storage_tier"])
			}
			inner := sub(em, "event")
			wantKeys(t, "event", inner, "event_id", "data", "dp_rank")
			stored := sub(sub(inner, "data"), "stored")
			wantKeys(t, "stored", stored, "parent_hash", "start_position", "blocks")
			for _, b := range stored["blocks"].([]any) {
				wantKeys(t, "block", b.(map[string]any), "block_hash", "tokens_hash", "mm_extra_info")
				counts[key]++
			}
		}
	}
	if counts["a:x"] != 2 || counts["model:v2:default"] != 1 {
		t.Fatalf("dumped blocks per partition = %v, want a:x 2 and model:v2:default 1", counts)
	}

	// With KV events on (listeners never started) the partition is dumped with no events.
	k := newHarnessWith(t, setup{kvEvents: true})
	k.addWorker(worker(1, "", "", 4, `"kv_events_endpoint":"tcp://127.0.0.1:5557"`))
	k.obj(http.StatusOK, "POST", "/select_and_reserve", `{"token_ids":[1,2,3,4]}`)
	if got := string(k.must(http.StatusOK, "GET", "/dump", "")); got != `{"default:default":{"block_size":4,"events":[]}}` {
		t.Fatalf("event-mode dump = %s (bookings must not feed the primary index)", got)
	}
}

// TestReplicaSyncDisabled checks the peer routes without a replicator: 409 "replica sync is
// disabled" for both changes (after body validation) and [] for the list.
func TestReplicaSyncDisabled(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/replica_sync/register_peer", "/replica_sync/deregister_peer"} {
		if got := string(h.must(http.StatusConflict, "POST", path, `{"endpoint":"tcp://selector-b:9092"}`)); got != `{"error":"replica sync is disabled"}` {
			t.Fatalf("%s = %s", path, got)
		}
		h.wantError(h.do("POST", path, `{}`), http.StatusUnprocessableEntity, "endpoint")
		h.wantError(h.do("POST", path, `{"endpoint":1}`), http.StatusUnprocessableEntity, "endpoint")
		h.wantError(h.do("POST", path, `{"endpoint":`), http.StatusBadRequest)
	}
	if got := string(h.must(http.StatusOK, "GET", "/replica_sync/peers", "")); got != "[]" {
		t.Fatalf("peers = %s, want []", got)
	}
}

// fakeReplicator is an in-memory peer set (publishing is not under test here). It embeds the
// interface so that methods the peer routes never call need no stub; calling one would panic on
// the nil embedded value, which would fail the test loudly.
type fakeReplicator struct {
	core.Replicator
	mu    sync.Mutex
	peers map[string]bool
}

func (f *fakeReplicator) Publish(*engine.ReplicaEvent) {}

func (f *fakeReplicator) AddPeer(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers[id] {
		return false
	}
	f.peers[id] = true
	return true
}

func (f *fakeReplicator) RemovePeer(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := f.peers[id]
	delete(f.peers, id)
	return ok
}

func (f *fakeReplicator) Peers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.peers))
	for p := range f.peers {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestReplicaSyncEnabled checks 201 for a new peer, 200 for a known one, 404 "peer not found",
// 400 for an empty endpoint and the sorted list.
func TestReplicaSyncEnabled(t *testing.T) {
	h := newHarnessWith(t, setup{opts: []core.Option{core.WithReplicator(&fakeReplicator{peers: map[string]bool{}})}})
	// Peer ids are opaque strings here (DESIGN.md): any non-empty endpoint is accepted.
	ok := `{"status":"ok"}`
	if got := string(h.must(http.StatusCreated, "POST", "/replica_sync/register_peer", `{"endpoint":"tcp://selector-c:9092"}`)); got != ok {
		t.Fatalf("register = %s", got)
	}
	h.must(http.StatusOK, "POST", "/replica_sync/register_peer", `{"endpoint":"tcp://selector-c:9092"}`)
	h.must(http.StatusCreated, "POST", "/replica_sync/register_peer", `{"endpoint":"tcp://selector-b:9092"}`)
	if got := string(h.must(http.StatusOK, "GET", "/replica_sync/peers", "")); got != `["tcp://selector-b:9092","tcp://selector-c:9092"]` {
		t.Fatalf("peers = %s", got)
	}
	h.wantError(h.do("POST", "/replica_sync/register_peer", `{"endpoint":""}`), http.StatusBadRequest, "endpoint")
	if got := string(h.must(http.StatusOK, "POST", "/replica_sync/deregister_peer", `{"endpoint":"tcp://selector-c:9092"}`)); got != ok {
		t.Fatalf("deregister = %s", got)
	}
	if got := string(h.must(http.StatusNotFound, "POST", "/replica_sync/deregister_peer", `{"endpoint":"tcp://selector-c:9092"}`)); got != `{"error":"peer not found"}` {
		t.Fatalf("deregistering an unknown peer = %s", got)
	}
	if got := string(h.must(http.StatusOK, "GET", "/replica_sync/peers", "")); got != `["tcp://selector-b:9092"]` {
		t.Fatalf("peers = %s", got)
	}
}
