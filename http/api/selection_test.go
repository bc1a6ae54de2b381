package api_test

// POST /select and POST /select_and_reserve (spec §2.4, §2.5, §4): response shapes, omission
// rules, signed-hash encoding pinned to the golden vectors, and every rejection.

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// selectKeys are the members of every selection response when no optional applies.
var selectKeys = []string{"model_name", "routing_group", "worker_id", "dp_rank", "endpoint", "block_size",
	"overlap", "effective_prefill_tokens", "potential_decode_blocks"}

// bookedKeys are the members select_and_reserve adds.
var bookedKeys = []string{"selection_id", "sequence_hashes", "isl_tokens", "track_prefill_tokens"}

// removedKeys must never appear in a selection response: fields Dynamo removed or renamed.
var removedKeys = []string{"cached_tokens", "effective_overlap_blocks", "tenant_id", "reservation_id"}

// uuidV4 matches a lowercase RFC 4122 version-4 UUID.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func withKeys(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

// TestSelectResponseShape checks /select's members: selection_id only when supplied, never the
// booking echo or removed fields, overlap with decimal-string dp keys covering every rank of the
// chosen worker, and the variant (a) decode projection for a partial trailing block.
func TestSelectResponseShape(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4, `"data_parallel_start_rank":4,"data_parallel_size":2`))

	resp := h.obj(http.StatusOK, "POST", "/select", `{"token_ids":`+tokens(0, 18)+`}`)
	wantKeys(t, "/select", resp, selectKeys...)
	ov := sub(resp, "overlap")
	wantKeys(t, "overlap", ov, "longest_matched", "gpu", "dp", "cpu", "disk")
	wantKeys(t, "overlap.dp", sub(ov, "dp"), "4", "5")
	for _, k := range []string{"longest_matched", "gpu", "cpu", "disk"} {
		if num(ov, k) != "0" {
			t.Errorf("overlap.%s = %v on an empty index", k, ov[k])
		}
	}
	if r := num(resp, "dp_rank"); r != "4" && r != "5" {
		t.Fatalf("dp_rank = %s, want a rank of [4, 6)", r)
	}
	if num(sub(ov, "dp"), num(resp, "dp_rank")) != "0" {
		t.Fatalf("zero-overlap response must list the selected rank with 0: %v", ov)
	}
	// 18 tokens, block size 4: 4 hashed blocks plus the partial trailing block.
	if num(resp, "effective_prefill_tokens") != "18" || num(resp, "potential_decode_blocks") != "5" {
		t.Fatalf("effective_prefill_tokens/potential_decode_blocks = %v/%v, want 18/5", resp["effective_prefill_tokens"], resp["potential_decode_blocks"])
	}
	if resp["endpoint"] != "http://w1:8000" || num(resp, "block_size") != "4" || resp["model_name"] != "default" || resp["routing_group"] != "default" {
		t.Fatalf("identity fields wrong: %v", resp)
	}

	// With a selection_id the id is echoed; the booking echo and removed fields stay absent.
	resp = h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"select-123","token_ids":[1,2,3,4],"session_id":"s","expected_output_tokens":8}`)
	wantKeys(t, "/select with id", resp, withKeys(selectKeys, "selection_id")...)
	if resp["selection_id"] != "select-123" {
		t.Fatalf("selection_id = %v", resp["selection_id"])
	}
	for _, k := range append(slices.Clone(removedKeys), bookedKeys[1:]...) {
		if _, ok := resp[k]; ok {
			t.Fatalf("/select response has %q", k)
		}
	}
}

// TestSelectNeverBooks checks that a query-only selection leaves load and index untouched.
func TestSelectNeverBooks(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	before := h.snap()
	for i := range 3 {
		h.obj(http.StatusOK, "POST", "/select", fmt.Sprintf(`{"selection_id":"s%d","token_ids":%s}`, i, tokens(0, 16)))
		h.obj(http.StatusOK, "POST", "/select", `{"advisory":true,"token_ids":`+tokens(0, 16)+`}`)
	}
	if after := h.snap(); after != before {
		t.Fatalf("/select changed state:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestSelectOverlapAfterBooking checks overlap in tokens on the rank that holds the prefix, with
// the other rank of the same worker listed at 0.
func TestSelectOverlapAfterBooking(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4, `"data_parallel_size":2`))
	// With KV events off the booking is recorded in the index for the rank that got it.
	booked := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"token_ids":`+tokens(0, 16)+`}`)
	rank := num(booked, "dp_rank")
	other := map[string]string{"0": "1", "1": "0"}[rank]

	resp := h.obj(http.StatusOK, "POST", "/select", `{"token_ids":`+tokens(0, 16)+`}`)
	ov := sub(resp, "overlap")
	if got := sub(ov, "dp"); num(got, rank) != "16" || num(got, other) != "0" {
		t.Fatalf("overlap.dp = %v, want rank %s at 16 tokens and rank %s at 0", got, rank, other)
	}
	for _, k := range []string{"longest_matched", "gpu", "cpu", "disk"} {
		if num(ov, k) != "16" {
			t.Fatalf("overlap.%s = %v, want 16", k, ov[k])
		}
	}
}

// TestSelectAdvisoryAndBusyFlags checks worker_load (advisory only), its optional members, and
// decode_busy's presence rule: threshold configured AND total_kv_blocks registered.
func TestSelectAdvisoryAndBusyFlags(t *testing.T) {
	decodeThr, prefillThr := 0.5, 0.9
	// The cases walk the presence rules of spec §2.4: worker_load only for advisory selects;
	// inside it total_kv_blocks only when registered and prefill_busy only with its threshold;
	// decode_busy only with both its threshold and total_kv_blocks. 16 tokens at block size 4
	// project 4 decode blocks, over half of a 2-block capacity, hence busy in the last case.
	cases := []struct {
		name           string
		thresholds     bool
		extra          string
		advisory       bool
		wantLoadKeys   []string // nil: no worker_load
		wantDecodeBusy any      // nil: omitted
		wantCapacity   string
	}{
		{"plain select", false, "", false, nil, nil, ""},
		{"advisory, no capacity", false, "", true, []string{"active_prefill_tokens", "prefill_token_capacity"}, nil, "10000000"},
		{"advisory with capacity", false, `"max_num_batched_tokens":8192,"total_kv_blocks":4096`, true,
			[]string{"active_prefill_tokens", "prefill_token_capacity", "total_kv_blocks"}, nil, "8192"},
		{"thresholds, capacity unknown", true, "", true, []string{"active_prefill_tokens", "prefill_token_capacity", "prefill_busy"}, nil, "10000000"},
		{"thresholds, not busy", true, `"max_num_batched_tokens":8192,"total_kv_blocks":4096`, true,
			[]string{"active_prefill_tokens", "prefill_token_capacity", "total_kv_blocks", "prefill_busy"}, false, "8192"},
		{"thresholds, decode busy", true, `"max_num_batched_tokens":8,"total_kv_blocks":2`, false, nil, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, setup{edit: func(c *engine.Config) {
				if tc.thresholds {
					c.DecodeBusyThreshold, c.PrefillBusyThreshold = &decodeThr, &prefillThr
				}
			}})
			extra := []string{}
			if tc.extra != "" {
				extra = append(extra, tc.extra)
			}
			h.addWorker(worker(1, "", "", 4, extra...))
			resp := h.obj(http.StatusOK, "POST", "/select", fmt.Sprintf(`{"advisory":%t,"token_ids":%s}`, tc.advisory, tokens(0, 16)))
			if got := resp["decode_busy"]; got != tc.wantDecodeBusy {
				t.Fatalf("decode_busy = %v, want %v", got, tc.wantDecodeBusy)
			}
			wl := sub(resp, "worker_load")
			if tc.wantLoadKeys == nil {
				if _, ok := resp["worker_load"]; ok {
					t.Fatalf("worker_load present without advisory: %v", resp)
				}
				return
			}
			wantKeys(t, "worker_load", wl, tc.wantLoadKeys...)
			if num(wl, "prefill_token_capacity") != tc.wantCapacity || num(wl, "active_prefill_tokens") != "0" {
				// The idle worker's current load; the probing prompt's 16 tokens are not in it.
				t.Fatalf("worker_load = %v", wl)
			}
		})
	}
}

// TestSelectAndReserveShape checks the booking echo, the generated UUID v4 id, status 200 and
// that advisory is ignored (the request books).
func TestSelectAndReserveShape(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	seen := map[string]bool{}
	for i := range 3 {
		resp := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"advisory":true,"token_ids":[1,2,3,4,5]}`)
		wantKeys(t, "/select_and_reserve", resp, withKeys(selectKeys, bookedKeys...)...)
		id, _ := resp["selection_id"].(string)
		if !uuidV4.MatchString(id) || seen[id] {
			t.Fatalf("generated selection_id %q: want a fresh UUID v4", id)
		}
		seen[id] = true
		if num(resp, "isl_tokens") != "5" || resp["track_prefill_tokens"] != true || len(nums(t, resp["sequence_hashes"])) != 1 {
			t.Fatalf("booking echo = %v", resp)
		}
		if got := h.loadOf("default", "default", 1, 0); got.requests != fmt.Sprint(i+1) {
			t.Fatalf("after %d bookings active_requests = %s", i+1, got.requests)
		}
	}
	// A supplied id is the booking id.
	resp := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"select-123","token_ids":[1,2,3,4]}`)
	if resp["selection_id"] != "select-123" {
		t.Fatalf("supplied selection_id not used: %v", resp["selection_id"])
	}
	// track_prefill_tokens echoes the override.
	resp = h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"token_ids":[1,2,3,4],"router_config_override":{"track_prefill_tokens":false}}`)
	if resp["track_prefill_tokens"] != false {
		t.Fatalf("track_prefill_tokens = %v with the override false", resp["track_prefill_tokens"])
	}
}

// goldenCases are golden-hashes.md's public-xxh3-v1 vectors, as the wire shows them (signed).
var goldenCases = []struct {
	name      string
	blockSize int
	prompt    string // JSON members besides token_ids
	tokens    string
	isl       string
	blockU64  []string // public block hashes, unsigned (as /dump shows tokens_hash)
	seqI64    []string // sequence hashes, signed (as select_and_reserve shows them)
}{
	{"tokens 0..15 bs 4", 4, "", tokens(0, 16), "16",
		[]string{"9143094415614847814", "12124091508212882195", "1088361764653601668", "16024980976528976948"},
		[]string{"9143094415614847814", "-8936425687869117083", "-1448595357992728965", "-1656357305439736907"}},
	{"tokens 0..17 bs 4", 4, "", tokens(0, 18), "18",
		[]string{"9143094415614847814", "12124091508212882195", "1088361764653601668", "16024980976528976948"},
		[]string{"9143094415614847814", "-8936425687869117083", "-1448595357992728965", "-1656357305439736907"}},
	{"tokens 1..32 bs 16", 16, "", tokens(1, 33), "32",
		[]string{"16863443419780771464", "2287610619914608821"},
		[]string{"-1583300653928780152", "-5980354406663771828"}},
	{"lora adapter-a", 4, `"lora_name":"adapter-a",`, tokens(0, 16), "16",
		[]string{"6665157333201000639", "11721812545976571723", "14488077642866817317", "15091969614435692781"},
		[]string{"6665157333201000639", "-5095224758860381088", "-8716191515914989471", "5048406500823931192"}},
	{"cache_salt tenant-a", 4, `"cache_salt":"tenant-a",`, tokens(0, 16), "16",
		[]string{"17009624042690211646", "10000672136415158886", "13984174126468215255", "18215876657075958645"},
		[]string{"-1437120031019339970", "-166923005989783736", "-3776283120613437892", "3881330659120310699"}},
	{"extreme tokens", 4, "", "[100000,4294967295,7,0]", "4",
		[]string{"1948362209192800259"},
		[]string{"1948362209192800259"}},
}

// TestSelectAndReserveGoldenHashes checks that token prompts are hashed exactly as Dynamo does:
// sequence_hashes in the response are the golden chain as signed i64, and the public block
// hashes the booking recorded in the (approximate) index are the golden block hashes, shown
// unsigned by /dump.
func TestSelectAndReserveGoldenHashes(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addWorker(worker(1, "", "", tc.blockSize))
			resp := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{`+tc.prompt+`"token_ids":`+tc.tokens+`}`)
			if got := nums(t, resp["sequence_hashes"]); !slices.Equal(got, tc.seqI64) {
				t.Fatalf("sequence_hashes = %v, want %v", got, tc.seqI64)
			}
			if num(resp, "isl_tokens") != tc.isl {
				t.Fatalf("isl_tokens = %v, want %s", resp["isl_tokens"], tc.isl)
			}
			if got := dumpTokensHashes(t, h); !slices.Equal(got, tc.blockU64) {
				t.Fatalf("/dump tokens_hash = %v, want %v", got, tc.blockU64)
			}
		})
	}
}

// dumpTokensHashes returns the tokens_hash of every block of the default partition's dump, in
// dump order.
func dumpTokensHashes(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	part := sub(h.obj(http.StatusOK, "GET", "/dump", ""), "default:default")
	for _, ev := range part["events"].([]any) {
		stored := sub(sub(sub(ev.(map[string]any), "event"), "data"), "stored")
		for _, b := range stored["blocks"].([]any) {
			out = append(out, num(b.(map[string]any), "tokens_hash"))
		}
	}
	return out
}

// TestSelectAndReserveHashPathSigned checks that precomputed hashes are trusted as-is: the
// signed extremes are echoed unchanged and reinterpreted as u64 bits in the index.
func TestSelectAndReserveHashPathSigned(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	// 11 tokens over 3 hashes: two full blocks plus a partial one, so the decode projection is
	// ceil(11/4) = 3 blocks.
	resp := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"block_hashes":[-1,-9223372036854775808,9223372036854775807],
		"sequence_hashes":[-2,5,-9223372036854775808],"isl_tokens":11}`)
	if got := nums(t, resp["sequence_hashes"]); !slices.Equal(got, []string{"-2", "5", "-9223372036854775808"}) {
		t.Fatalf("sequence_hashes = %v", got)
	}
	if num(resp, "isl_tokens") != "11" || num(resp, "potential_decode_blocks") != "3" {
		t.Fatalf("isl_tokens/potential_decode_blocks = %v/%v, want 11/3", resp["isl_tokens"], resp["potential_decode_blocks"])
	}
	if got := dumpTokensHashes(t, h); !slices.Equal(got, []string{"18446744073709551615", "9223372036854775808", "9223372036854775807"}) {
		t.Fatalf("/dump tokens_hash = %v", got)
	}
	// An empty hash list is allowed when isl_tokens > 0 (no index lookup).
	resp = h.obj(http.StatusOK, "POST", "/select", `{"block_hashes":[],"sequence_hashes":[],"isl_tokens":3}`)
	if num(resp, "potential_decode_blocks") == "" {
		t.Fatalf("empty-hash select = %v", resp)
	}
}

// TestSelectAndReserveDuplicate checks 409 for a booked id, in any partition, and that the id is
// reusable once freed.
func TestSelectAndReserveDuplicate(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	h.addWorker(worker(2, "other", "", 4))
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"dup","token_ids":[1,2,3,4]}`)
	// Ids are process-wide: the same id in another partition conflicts too.
	before := h.snap()
	h.wantError(h.do("POST", "/select_and_reserve", `{"selection_id":"dup","token_ids":[1,2,3,4]}`),
		http.StatusConflict, "selection dup is already reserved or being reserved")
	h.wantError(h.do("POST", "/select_and_reserve", `{"selection_id":"dup","model_name":"other","token_ids":[9,9,9,9]}`),
		http.StatusConflict, "dup")
	if after := h.snap(); after != before {
		t.Fatalf("409 changed state:\n%+v\n%+v", before, after)
	}
	h.must(http.StatusOK, "DELETE", "/reservations/dup", "")
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"dup","token_ids":[1,2,3,4]}`)
}

// TestSelectRejections covers prompt validation (400), serde-level value checks (422), an unready
// partition (503) and candidates filtered away (503), on both selection routes.
func TestSelectRejections(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/select", "/select_and_reserve"} {
		h.wantError(h.do("POST", path, `{"token_ids":[1,2,3,4]}`), http.StatusServiceUnavailable, "no schedulable workers are available")
	}
	h.addWorker(worker(1, "", "", 4))
	// Groups: prompt validation of spec §4.1 (400, Dynamo's messages); values serde would refuse
	// while deserialising (422); the partition or every candidate unavailable (503).
	cases := []struct {
		name, body string
		status     int
		fragment   string
	}{
		{"no prompt", `{}`, 400, "block_hashes is required without token_ids"},
		{"empty token_ids", `{"token_ids":[]}`, 400, "block_hashes is required without token_ids"},
		{"no sequence hashes", `{"block_hashes":[1]}`, 400, "sequence_hashes is required without token_ids"},
		{"no isl", `{"block_hashes":[1],"sequence_hashes":[1]}`, 400, "isl_tokens is required without token_ids"},
		{"zero isl", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":0}`, 400, "isl_tokens must be greater than 0"},
		{"length mismatch", `{"block_hashes":[1,2],"sequence_hashes":[1],"isl_tokens":8}`, 400, "block_hashes length 2 must match sequence_hashes length 1"},
		{"negative token", `{"token_ids":[-1]}`, 422, "token_ids"},
		{"token over u32", `{"token_ids":[4294967296]}`, 422, "token_ids"},
		{"hash over i64", `{"block_hashes":[9223372036854775808],"sequence_hashes":[1],"isl_tokens":4}`, 422, "block_hashes"},
		{"session_context without id", `{"token_ids":[1],"session_context":{"parent_session_id":"p"}}`, 422, "session_id"},
		{"bad input_trigger", `{"token_ids":[1],"session_context":{"session_id":"s","input_trigger":"cron"}}`, 422, "input_trigger"},
		{"pinned_worker without rank", `{"token_ids":[1],"pinned_worker":{"worker_id":1}}`, 422, "dp_rank"},
		{"affinity_target without worker", `{"token_ids":[1],"affinity_target":{"dp_rank":0}}`, 422, "worker_id"},
		{"negative temperature", `{"token_ids":[1],"router_config_override":{"router_temperature":-1}}`, 422, "router_temperature"},
		{"shared multiplier over 1", `{"token_ids":[1],"router_config_override":{"shared_cache_multiplier":2}}`, 422, "shared_cache_multiplier"},
		{"other partition", `{"model_name":"nope","token_ids":[1]}`, 503, "no schedulable workers for model=nope routing_group=default"},
		{"allowed list excludes all", `{"token_ids":[1],"allowed_worker_ids":[7]}`, 503, "no endpoints available to route work"},
		{"required taint", `{"token_ids":[1],"routing_constraints":{"required_taints":["gpu"]}}`, 503, "no endpoints"},
		{"pinned elsewhere", `{"token_ids":[1],"pinned_worker":{"worker_id":1,"dp_rank":3}}`, 503, "pinned worker 1 (dp_rank 3)"},
	}
	before := h.snap()
	for _, tc := range cases {
		for _, path := range []string{"/select", "/select_and_reserve"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				hs := h.on(t)
				hs.wantError(hs.do("POST", path, tc.body), tc.status, tc.fragment)
			})
		}
	}
	if after := h.snap(); after != before {
		t.Fatalf("rejected selections changed state:\n%+v\n%+v", before, after)
	}
}

// TestSelectTargets checks that pinned_worker, affinity_target and allowed_worker_ids steer the
// pick, and that the policy-class header is accepted when queueing is off.
func TestSelectTargets(t *testing.T) {
	h := newHarness(t)
	// Three idle workers with equal cost, each with its own taint, so only the request's
	// targeting can decide the pick.
	for id := uint64(1); id <= 3; id++ {
		h.addWorker(worker(id, "", "", 4, `"taints":["t`+fmt.Sprint(id)+`"]`))
	}
	cases := []struct{ body, want string }{
		{`{"token_ids":[1],"pinned_worker":{"worker_id":2,"dp_rank":0}}`, "2"},
		{`{"token_ids":[1],"affinity_target":{"worker_id":3}}`, "3"},
		{`{"token_ids":[1],"allowed_worker_ids":[1]}`, "1"},
		{`{"token_ids":[1],"routing_constraints":{"required_taints":["t2"]}}`, "2"},
	}
	for _, tc := range cases {
		for range 4 { // ties are broken at random: repeat so a lucky pick cannot pass
			resp := h.obj(http.StatusOK, "POST", "/select", tc.body, "x-dynamo-meta-policy-class", "  interactive ")
			if got := num(resp, "worker_id"); got != tc.want {
				t.Fatalf("%s picked worker %s, want %s", tc.body, got, tc.want)
			}
		}
	}
}
