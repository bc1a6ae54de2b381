package api_test

// Decoding and routing conventions (spec §2.0), checked on every route that takes a JSON body:
// axum's split between malformed JSON (400), wrong types (422), missing content type (415) and
// oversized bodies (413); 404/405 envelopes; no trailing-slash redirects; unknown fields ignored.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// jsonRoute is a route with a JSON body and a body it accepts.
type jsonRoute struct {
	method, path string
	valid        string // a body that succeeds on the fixture of newDecodeHarness
	okStatus     int
}

// jsonRoutes lists every route that decodes a JSON body.
var jsonRoutes = []jsonRoute{
	{"POST", "/workers", worker(5, "", "", 4), 201},
	{"PATCH", "/workers/1", `{"total_kv_blocks":100}`, 200},
	{"POST", "/select", `{"token_ids":[1,2,3,4]}`, 200},
	{"POST", "/select_and_reserve", `{"token_ids":[1,2,3,4]}`, 200},
	{"POST", "/reservations", `{"selection_id":"fresh","worker_id":1,"sequence_hashes":[1],"isl_tokens":4}`, 201},
	{"POST", "/reservations/r1/output_block", `{"decay_fraction":0.5}`, 200},
	{"POST", "/potential_loads", `{"token_ids":[1,2,3,4]}`, 200},
	{"POST", "/overlap_scores", `{"token_ids":[1,2,3,4]}`, 200},
	{"POST", "/replica_sync/register_peer", `{"endpoint":"tcp://b:9092"}`, 409},
	{"POST", "/replica_sync/deregister_peer", `{"endpoint":"tcp://b:9092"}`, 409},
}

// newDecodeHarness is a service with worker 1 and booking r1, so every valid body succeeds.
func newDecodeHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r1","token_ids":[1,2,3,4]}`)
	return h
}

// TestJSONBodyConventions sends each class of bad body to every JSON route.
func TestJSONBodyConventions(t *testing.T) {
	h := newDecodeHarness(t)
	// Syntax errors (including an empty or whitespace-only body and trailing data) are 400;
	// well-formed JSON that is not an object is a data error, 422, as serde reports it.
	bodies := []struct {
		name, body string
		status     int
	}{
		{"unterminated object", `{`, 400},
		{"missing value", `{"a":}`, 400},
		{"trailing garbage", `{"a":1}x`, 400},
		{"two values", `{} {}`, 400},
		{"bad literal", `nul`, 400},
		{"lone string start", `"`, 400},
		{"whitespace only", " \n\t", 400},
		{"array", `[]`, 422},
		{"string", `"x"`, 422},
		{"number", `1`, 422},
		{"boolean", `true`, 422},
		{"null", `null`, 422},
	}
	for _, rt := range jsonRoutes {
		for _, b := range bodies {
			t.Run(rt.method+" "+rt.path+" "+b.name, func(t *testing.T) {
				hs := h.on(t)
				hs.wantError(hs.do(rt.method, rt.path, b.body, "Content-Type", "application/json"), b.status)
			})
		}
		t.Run(rt.method+" "+rt.path+" empty body", func(t *testing.T) {
			hs := h.on(t)
			hs.wantError(hs.do(rt.method, rt.path, "", "Content-Type", "application/json"), http.StatusBadRequest)
		})
	}
}

// TestContentType checks 415 (before the body is even parsed) for a missing or non-JSON content
// type, and that JSON media types with parameters or a +json suffix are accepted.
func TestContentType(t *testing.T) {
	h := newDecodeHarness(t)
	for _, rt := range jsonRoutes {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "json", "application/", ";;"} {
			t.Run(rt.path+" "+ct, func(t *testing.T) {
				hs := h.on(t)
				hs.wantError(hs.do(rt.method, rt.path, rt.valid, "Content-Type", ct), http.StatusUnsupportedMediaType, "Content-Type: application/json")
				// The media type is checked first: a malformed body still gets 415.
				hs.wantError(hs.do(rt.method, rt.path, "{", "Content-Type", ct), http.StatusUnsupportedMediaType)
			})
		}
	}
	// axum accepts application/json and any application/*+json, with parameters and in any
	// letter case.
	h2 := newHarness(t)
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.kvselect+json"} {
		body := worker(uint64(10+i), "", "", 4)
		if r := h2.do("POST", "/workers", body, "Content-Type", ct); r.status != http.StatusCreated {
			t.Errorf("Content-Type %q: got %s, want 201", ct, r)
		}
	}
}

// TestBodyLimit checks the 8 MiB limit: a valid body of exactly 8 MiB is accepted and one byte
// more is 413, on every JSON route.
func TestBodyLimit(t *testing.T) {
	const limit = 8 << 20
	h := newDecodeHarness(t)
	// pad right-pads a valid body with spaces (still valid JSON) to exactly size bytes.
	pad := func(body string, size int) []byte {
		b := make([]byte, 0, size)
		b = append(b, body...)
		return append(b, bytes.Repeat([]byte(" "), size-len(body))...)
	}
	for _, rt := range jsonRoutes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			hs := h.on(t)
			hs.wantError(hs.doBytes(rt.method, rt.path, pad(rt.valid, limit+1)), http.StatusRequestEntityTooLarge, "length limit exceeded")
		})
	}
	// Exactly at the limit: accepted (on routes whose success is repeatable).
	for _, rt := range []jsonRoute{jsonRoutes[0], jsonRoutes[2], jsonRoutes[6]} {
		if r := h.doBytes(rt.method, rt.path, pad(rt.valid, limit)); r.status != rt.okStatus {
			t.Fatalf("%s %s with an 8 MiB body: got %s, want %d", rt.method, rt.path, r, rt.okStatus)
		}
	}
	// Large prompts: the most the per-request limits allow at block size 4 (65,536 blocks =
	// 262,144 tokens) decodes and selects; one block more is 413 naming the hash limit; and
	// 1.5 M tokens, well within 8 MiB, is 413 naming the token limit.
	tokens := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"token_ids":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('1')
		}
		b.WriteString(`]}`)
		if b.Len() > limit {
			t.Fatalf("test body is %d bytes, over the limit", b.Len())
		}
		return b.Bytes()
	}
	short := func(b []byte) string { return string(b[:min(len(b), 300)]) }
	if r := h.doBytes("POST", "/select", tokens(262_144)); r.status != http.StatusOK || !strings.Contains(string(r.body), `"effective_prefill_tokens":262144`) {
		t.Fatalf("262,144-token prompt: %d %s", r.status, short(r.body))
	}
	if r := h.doBytes("POST", "/select", tokens(262_148)); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "the limit is 65536 per request (--max-request-hashes)") {
		t.Fatalf("65,537-block prompt: %d %s, want 413 naming the hash limit", r.status, short(r.body))
	}
	if r := h.doBytes("POST", "/select", tokens(1_500_000)); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "the limit is 1048576 per request (--max-request-tokens)") {
		t.Fatalf("1.5M-token prompt: %d %s, want 413 naming the token limit", r.status, short(r.body))
	}
}

// TestUnknownFieldsIgnored checks that extra members, top-level and nested, change nothing.
func TestUnknownFieldsIgnored(t *testing.T) {
	// Two identical services get the same requests, one with extra members; answers and
	// final state must be byte-identical. Removed Dynamo fields (tenant_id, cached_tokens,
	// reservation_id) are among the extras: old clients sending them must keep working.
	plain, extra := newHarness(t), newHarness(t)
	for _, h := range []*harness{plain, extra} {
		h.addWorker(worker(1, "", "", 4))
	}
	pairs := []struct{ method, path, a, b string }{
		{"POST", "/workers", worker(2, "", "", 4), worker(2, "", "", 4, `"future_field":{"x":[1]}`, `"tenant_id":"t"`)},
		{"PATCH", "/workers/2", `{"total_kv_blocks":9}`, `{"total_kv_blocks":9,"nope":null}`},
		{"POST", "/select", `{"selection_id":"s","token_ids":[1,2,3,4],"session_context":{"session_id":"x"}}`,
			`{"selection_id":"s","token_ids":[1,2,3,4],"session_context":{"session_id":"x","later":1},"routing_constraints":{"hmm":[]},"cached_tokens":5}`},
		{"POST", "/reservations", `{"selection_id":"s"}`, `{"selection_id":"s","reservation_id":"zz","overlap":{"gpu":1}}`},
		{"POST", "/reservations/s/output_block", `{}`, `{"blocks":3}`},
		{"POST", "/overlap_scores", `{"token_ids":[1,2,3,4]}`, `{"token_ids":[1,2,3,4],"x":{}}`},
	}
	for _, p := range pairs {
		ra, rb := plain.do(p.method, p.path, p.a), extra.do(p.method, p.path, p.b)
		if ra.status != rb.status || !bytes.Equal(ra.body, rb.body) {
			t.Fatalf("%s %s: unknown fields changed the answer:\n%s\n%s", p.method, p.path, ra, rb)
		}
	}
	if a, b := plain.snap(), extra.snap(); a != b {
		t.Fatalf("unknown fields changed state:\n%+v\n%+v", a, b)
	}
}

// TestRoutingEnvelopes checks the 404 and 405 bodies, the Allow header on 405, and that a
// trailing slash is a plain 404, never a redirect.
func TestRoutingEnvelopes(t *testing.T) {
	h := newDecodeHarness(t)
	// Unknown paths, optional routes that are not configured, every route with a trailing
	// slash, a doubled slash and a case change: all 404 without a Location header (the client
	// does not follow redirects, so a redirect would show as a 3xx).
	notFound := []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/nope"}, {"POST", "/selects"}, {"GET", "/workers/1/extra"},
		{"GET", "/v1alpha1/select"}, {"GET", "/metrics"},
		{"GET", "/workers/"}, {"POST", "/workers/"}, {"POST", "/select/"}, {"POST", "/select_and_reserve/"},
		{"GET", "/health/"}, {"GET", "/ready/"}, {"GET", "/loads/"}, {"GET", "/dump/"},
		{"POST", "/reservations/"}, {"POST", "/reservations/r1/prefill_complete/"}, {"DELETE", "/reservations/r1/"},
		{"PATCH", "/workers/1/"}, {"GET", "/replica_sync/peers/"}, {"POST", "/potential_loads/"},
		{"GET", "//workers"}, {"GET", "/WORKERS"},
	}
	for _, c := range notFound {
		r := h.do(c.method, c.path, "")
		if r.status != http.StatusNotFound || string(r.body) != `{"error":"route not found"}` || r.header.Get("Location") != "" {
			t.Errorf("%s %s: got %s (Location %q), want 404 route not found without redirect", c.method, c.path, r, r.header.Get("Location"))
		}
	}
	// Known paths with the wrong method: 405, and Allow lists the methods the path serves
	// (HEAD wherever GET is served, as axum lists it).
	wrongMethod := []struct{ method, path, allow string }{
		{"GET", "/select", "POST"}, {"PUT", "/workers", "GET, HEAD, POST"}, {"DELETE", "/select_and_reserve", "POST"},
		{"GET", "/reservations/r1/output_block", "POST"}, {"POST", "/health", "GET, HEAD"}, {"POST", "/loads", "GET, HEAD"},
		{"GET", "/potential_loads", "POST"}, {"POST", "/dump", "GET, HEAD"}, {"PUT", "/replica_sync/peers", "GET, HEAD"},
		{"GET", "/workers/1", "DELETE, PATCH"}, {"PUT", "/reservations/r1", "DELETE"}, {"POST", "/reservations/r1", "DELETE"},
	}
	for _, c := range wrongMethod {
		r := h.do(c.method, c.path, "")
		if r.status != http.StatusMethodNotAllowed || string(r.body) != `{"error":"method not allowed"}` {
			t.Errorf("%s %s: got %s, want 405 method not allowed", c.method, c.path, r)
		}
		if got := r.header.Get("Allow"); !sameMethods(got, c.allow) {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}

// sameMethods compares comma-separated method lists as sets (OPTIONS, which the router may add,
// is ignored).
func sameMethods(a, b string) bool {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" && p != "OPTIONS" {
				m[p] = true
			}
		}
		return m
	}
	return mapsEqual(set(a), set(b))
}
