package engine

// Catalog tests: UpsertWorker's refusals, record shape and reasons, and PatchWorker. The
// rank-by-rank reconciliation rules of the seed's "Worker Restarts" section, partition moves
// and reshapes, DELETE and the listing order are testdata/catalog.txt (spec §3.2–§3.5).

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestUpsertWorkerErrors covers every input UpsertWorker refuses (HTTP 422): nothing is
// registered by a refused upsert.
func TestUpsertWorkerErrors(t *testing.T) {
	// Each row is one value serde would refuse while deserialising the body; the engine mirrors
	// those refusals as ErrUnprocessable so the HTTP layer answers 422 with the same wording.
	tests := []struct {
		name string
		spec WorkerSpec
		want string
	}{
		// worker_id is the only required field of POST /workers.
		{"missing worker_id", WorkerSpec{Endpoint: ptr("http://x")}, "missing field `worker_id`"},
		// Map keys of per-rank maps are decimal u32 global ranks.
		{"kv_events_endpoints rank not a number", spec(1, func(s *WorkerSpec) { s.KVEventsEndpoints = map[string]string{"zero": "tcp://a:1"} }), `kv_events_endpoints: invalid DP rank key "zero"`},
		{"kv_events_endpoints rank overflows u32", spec(1, func(s *WorkerSpec) { s.KVEventsEndpoints = map[string]string{"4294967296": "tcp://a:1"} }), "expected a u32"},
		{"hint source rank negative", spec(1, func(s *WorkerSpec) { s.RouterHintSourceControlEndpoints = map[string]string{"-1": "tcp://a:1"} }), "router_hint_source_control_endpoints: invalid DP rank key"},
		// Enum strings outside their variant set.
		{"unknown enforcement", spec(1, func(s *WorkerSpec) { s.KVTransferEnforcement = ptr("sometimes") }), "kv_transfer_enforcement: unknown variant `sometimes`"},
		{"unknown source mode", spec(1, func(s *WorkerSpec) { s.KVEventSourceMode = ptr("v3") }), "kv_event_source_mode: unknown variant `v3`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, nil)
			_, err := e.UpsertWorker(tc.spec)
			wantErr(t, err, ErrUnprocessable, tc.want)
			if n := len(e.Workers("", "")); n != 0 {
				t.Fatalf("refused upsert left %d workers", n)
			}
		})
	}
}

// TestUpsertWorkerRecordShape checks the JSON echo of a record: absent optional scalars are
// null, taints and topology_domains are always present, empty maps and unset hint fields are
// omitted, and model_name/routing_group default to "default".
func TestUpsertWorkerRecordShape(t *testing.T) {
	e := newEngine(t, nil)
	rec, err := e.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(9))})
	noErr(t, err)
	raw, err := json.Marshal(rec)
	noErr(t, err)
	var m map[string]json.RawMessage
	noErr(t, json.Unmarshal(raw, &m))

	// Spec §3.2: every optional scalar is echoed, as null when unset (clients index the keys).
	nulls := []string{"endpoint", "kv_events_endpoint", "replay_endpoint", "block_size", "data_parallel_start_rank",
		"data_parallel_size", "max_num_batched_tokens", "total_kv_blocks", "stable_routing_id", "is_eagle",
		"kv_transfer_domain", "kv_transfer_enforcement", "kv_transfer_preferred_weight"}
	for _, k := range nulls {
		if string(m[k]) != "null" {
			t.Errorf("%s = %s, want null", k, m[k])
		}
	}
	// Defaults and always-present collections.
	wantJSON := map[string]string{"worker_id": "9", "model_name": `"default"`, "routing_group": `"default"`,
		"taints": "[]", "topology_domains": "{}", "lifecycle": `"incomplete"`}
	for k, v := range wantJSON {
		if string(m[k]) != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
	// Empty maps and unset hint fields are omitted, not null; listeners is filled by the service.
	for _, k := range []string{"kv_events_endpoints", "router_hint_worker_type", "router_hint_source_control_endpoints", "kv_event_source_mode", "listeners"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s present (%s), want omitted", k, m[k])
		}
	}
	if _, ok := m["not_schedulable_reasons"]; !ok {
		t.Errorf("incomplete record lacks not_schedulable_reasons")
	}

	// A schedulable record omits not_schedulable_reasons and echoes what was given.
	rec = mustUpsert(t, e, spec(1, func(s *WorkerSpec) {
		s.Taints = []string{"zeta", "alpha", "zeta"}
		s.TopologyDomains = map[string]string{"rack": "r1"}
		s.IsEagle = ptr(false)
	}))
	raw, _ = json.Marshal(rec)
	if strings.Contains(string(raw), "not_schedulable_reasons") {
		t.Errorf("schedulable record has reasons: %s", raw)
	}
	// taints is a set: duplicates collapse and the echo is sorted.
	if !slices.Equal(rec.Taints, []string{"alpha", "zeta"}) {
		t.Errorf("taints %q, want the sorted set [alpha zeta]", rec.Taints)
	}
	if rec.TopologyDomains["rack"] != "r1" || rec.IsEagle == nil || *rec.IsEagle {
		t.Errorf("echo lost fields: %+v", rec)
	}
	if rec.DataParallelSize != nil {
		t.Errorf("data_parallel_size echoed as %d, want null (absent)", *rec.DataParallelSize)
	}
}

// TestUpsertWorkerReasons checks not_schedulable_reasons and their order (spec §3.4).
func TestUpsertWorkerReasons(t *testing.T) {
	queueCfg := DefaultConfig()
	queueCfg.QueueThreshold = ptr(0.5)
	// Rows follow spec §3.4's order: metadata (1–3), queueing (4), KV-event endpoints (5),
	// partition reconciliation (6), endpoint validation (7). Later stages run only when the
	// earlier ones found nothing, which the last two rows pin down.
	tests := []struct {
		name string
		cfg  *Config
		pre  []WorkerSpec // registered first (must be schedulable)
		spec WorkerSpec
		want []string // nil = schedulable
	}{
		{name: "complete", spec: spec(1)},
		{name: "nothing but id", spec: WorkerSpec{WorkerID: ptr(uint64(1))}, want: []string{
			"endpoint is required", "block_size must be greater than 0", "kv_events endpoint is required for dp_rank 0"}},
		{name: "empty endpoint, zero block size, zero dp size", spec: spec(1, func(s *WorkerSpec) {
			s.Endpoint, s.BlockSize, s.DataParallelSize = ptr(""), ptr(uint32(0)), ptr(uint32(0))
		}), want: []string{"endpoint is required", "block_size must be greater than 0", "data_parallel_size must be greater than 0"}},
		// A rank range ending at 2^32-1 or beyond would make every uint32 rank loop wrap.
		{name: "rank range past u32 (would wrap)", spec: spec(1, func(s *WorkerSpec) { s.DataParallelStartRank = ptr(uint32(math.MaxUint32)) }), want: []string{
			"data_parallel_start_rank + data_parallel_size must not exceed 4294967295"}},
		{name: "rank range past u32 without KV events", cfg: approxConfig(), spec: spec(1, func(s *WorkerSpec) {
			s.DataParallelStartRank, s.DataParallelSize = ptr(uint32(math.MaxUint32-1)), ptr(uint32(2))
		}), want: []string{"data_parallel_start_rank + data_parallel_size must not exceed 4294967295"}},
		{name: "last representable range", cfg: approxConfig(), spec: spec(1, func(s *WorkerSpec) {
			s.DataParallelStartRank, s.DataParallelSize = ptr(uint32(math.MaxUint32-2)), ptr(uint32(2))
		})},
		{name: "queueing requires max_num_batched_tokens", cfg: &queueCfg, spec: spec(1), want: []string{
			"max_num_batched_tokens is required while queueing is enabled"}},
		{name: "queueing satisfied", cfg: &queueCfg, spec: spec(1, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(8192)) })},
		// kv_events_endpoint (singular) only serves a single-rank worker.
		{name: "singular kv endpoint does not serve two ranks", spec: spec(1, func(s *WorkerSpec) { s.DataParallelSize = ptr(uint32(2)) }), want: []string{
			"kv_events endpoint is required for dp_rank 0", "kv_events endpoint is required for dp_rank 1"}},
		{name: "per-rank endpoints use global ranks", spec: spec(1, dp(4, 2), func(s *WorkerSpec) { delete(s.KVEventsEndpoints, "5") }), want: []string{
			"kv_events endpoint is required for dp_rank 5"}},
		{name: "replay only for one rank", spec: spec(1, dp(0, 2), func(s *WorkerSpec) { s.ReplayEndpoint = ptr("tcp://w1:5558") }), want: []string{
			"replay_endpoint is supported only for data_parallel_size 1"}},
		{name: "kv events off needs no endpoint", cfg: approxConfig(), spec: spec(1, func(s *WorkerSpec) { s.KVEventsEndpoint = nil; s.DataParallelSize = ptr(uint32(3)) })},
		// Step 7: ZMQ validation messages are embedded verbatim after the rank or replay prefix.
		{name: "invalid kv endpoint", spec: spec(1, func(s *WorkerSpec) { s.KVEventsEndpoint = ptr("tcp://w1") }), want: []string{
			"reconciliation failed: invalid kv_events endpoint for worker 1 dp_rank 0: invalid ZMQ endpoint `tcp://w1`: missing TCP port"}},
		{name: "invalid endpoints of two ranks and replay", spec: spec(1, dp(0, 2), func(s *WorkerSpec) {
			s.KVEventsEndpoints = map[string]string{"0": "udp://a:1", "1": "tcp://:1"}
		}), want: []string{
			"reconciliation failed: invalid kv_events endpoint for worker 1 dp_rank 0: invalid ZMQ endpoint `udp://a:1`: unsupported scheme `udp`",
			"reconciliation failed: invalid kv_events endpoint for worker 1 dp_rank 1: invalid ZMQ endpoint `tcp://:1`: missing TCP host"}},
		{name: "invalid replay endpoint", spec: spec(1, func(s *WorkerSpec) { s.ReplayEndpoint = ptr("tcp://w1:99999") }), want: []string{
			"reconciliation failed: invalid replay endpoint for worker 1: invalid ZMQ endpoint `tcp://w1:99999`: invalid TCP port: number too large to fit in target type"}},
		// Step 6: block_size and is_eagle are fixed per partition by its first member.
		{name: "block size mismatch", pre: []WorkerSpec{spec(2)}, spec: spec(1, func(s *WorkerSpec) { s.BlockSize = ptr(uint32(16)) }), want: []string{
			"reconciliation failed: block_size mismatch for model=default routing_group=default: existing=4 requested=16"}},
		{name: "is_eagle mismatch", pre: []WorkerSpec{spec(2)}, spec: spec(1, func(s *WorkerSpec) { s.IsEagle = ptr(true) }), want: []string{
			"reconciliation failed: is_eagle mismatch for model=default routing_group=default: existing=false requested=true"}},
		{name: "other partition may use another block size", pre: []WorkerSpec{spec(2)}, spec: spec(1, inModel("m", "g"), func(s *WorkerSpec) { s.BlockSize = ptr(uint32(16)) })},
		{name: "metadata reasons come before partition checks", pre: []WorkerSpec{spec(2)}, spec: spec(1, func(s *WorkerSpec) {
			s.Endpoint, s.BlockSize = nil, ptr(uint32(16))
		}), want: []string{"endpoint is required"}},
		{name: "partition checks come before endpoint validation", pre: []WorkerSpec{spec(2)}, spec: spec(1, func(s *WorkerSpec) {
			s.BlockSize, s.KVEventsEndpoint = ptr(uint32(16)), ptr("bogus")
		}), want: []string{"reconciliation failed: block_size mismatch for model=default routing_group=default: existing=4 requested=16"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.cfg)
			for _, s := range tc.pre {
				mustUpsert(t, e, s)
			}
			rec, err := e.UpsertWorker(tc.spec)
			noErr(t, err)
			if !slices.Equal(rec.NotSchedulableReasons, tc.want) {
				t.Fatalf("reasons\n got %q\nwant %q", rec.NotSchedulableReasons, tc.want)
			}
			wantLife := LifecycleSchedulable
			if tc.want != nil {
				wantLife = LifecycleIncomplete
			}
			if rec.Lifecycle != wantLife {
				t.Fatalf("lifecycle %s, want %s", rec.Lifecycle, wantLife)
			}
			if got, _ := e.Worker(*tc.spec.WorkerID); got.Lifecycle != wantLife {
				t.Fatalf("catalog lifecycle %s, want %s", got.Lifecycle, wantLife)
			}
			// Readiness counts follow the lifecycle: an incomplete record is never schedulable.
			wantSched := len(tc.pre)
			if tc.want == nil {
				wantSched++
			}
			if n := e.SchedulableCount(); n != wantSched {
				t.Fatalf("SchedulableCount %d, want %d", n, wantSched)
			}
		})
	}
}

// TestPatchWorker covers PATCH: 404, 422, supplied fields only, wholesale map replacement,
// model_name not patchable, and a patch that completes an incomplete worker.
func TestPatchWorker(t *testing.T) {
	e := newEngine(t, nil)
	_, err := e.PatchWorker(5, WorkerPatch{})
	wantErr(t, err, ErrNotFound, "worker 5 not found")

	rec, err := e.UpsertWorker(spec(1, func(s *WorkerSpec) {
		s.Endpoint = nil
		s.Taints = []string{"a", "b"}
		s.TopologyDomains = map[string]string{"zone": "z1", "rack": "r1"}
		s.TotalKVBlocks = ptr(uint64(10))
	}))
	noErr(t, err)
	if rec.Lifecycle != LifecycleIncomplete {
		t.Fatalf("lifecycle %s", rec.Lifecycle)
	}
	_, err = e.PatchWorker(1, WorkerPatch{KVTransferEnforcement: ptr("never")})
	wantErr(t, err, ErrUnprocessable, "kv_transfer_enforcement")

	// model_name in a patch is ignored (not patchable); maps are replaced, not merged.
	rec, err = e.PatchWorker(1, WorkerPatch{
		Endpoint:        ptr("http://w1:9000"),
		ModelName:       ptr("other"),
		Taints:          []string{"c"},
		TopologyDomains: map[string]string{"zone": "z2"},
	})
	noErr(t, err)
	if rec.Lifecycle != LifecycleSchedulable || rec.ModelName != DefaultName {
		t.Fatalf("patched record: lifecycle %s model %s", rec.Lifecycle, rec.ModelName)
	}
	if !slices.Equal(rec.Taints, []string{"c"}) || len(rec.TopologyDomains) != 1 || rec.TopologyDomains["zone"] != "z2" {
		t.Fatalf("maps not replaced wholesale: %q %v", rec.Taints, rec.TopologyDomains)
	}
	if rec.TotalKVBlocks == nil || *rec.TotalKVBlocks != 10 || *rec.BlockSize != 4 {
		t.Fatalf("unsupplied fields changed: %+v", rec)
	}
	resp, err := e.Select(selReq("", toks(0, 4)), t0)
	noErr(t, err)
	if resp.Endpoint != "http://w1:9000" {
		t.Fatalf("selection endpoint %q", resp.Endpoint)
	}

	// A patch that breaks the worker makes it incomplete again.
	rec, err = e.PatchWorker(1, WorkerPatch{BlockSize: ptr(uint32(0))})
	noErr(t, err)
	if rec.Lifecycle != LifecycleIncomplete || rec.NotSchedulableReasons[0] != "block_size must be greater than 0" {
		t.Fatalf("broken patch: %s %q", rec.Lifecycle, rec.NotSchedulableReasons)
	}
}

// TestWorkersListingEmpty: an empty listing is an empty slice (JSON []), not nil. Sorting and
// filters are testdata/catalog.txt.
func TestWorkersListingEmpty(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	if e.Workers("zzz", "") == nil {
		t.Errorf("empty listing is nil, want an empty slice (JSON [])")
	}
}

// TestEventSources lists one subscription per global rank, and none with KV events off.
func TestEventSources(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, dp(2, 2)))
	src := e.EventSources(1)
	if len(src) != 2 || src[0].Owner != (kvwire.Owner{Worker: 1, Rank: 2}) || src[1].Endpoint != "tcp://w1:6003" || src[0].BlockSize != 4 {
		t.Fatalf("sources %+v", src)
	}
	if e.EventSources(99) != nil {
		t.Fatalf("an unknown worker lists sources")
	}
	a := newEngine(t, approxConfig())
	mustUpsert(t, a, spec(1))
	if s := a.EventSources(1); s != nil {
		t.Fatalf("approximate mode lists sources %+v", s)
	}
}
