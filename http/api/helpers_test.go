package api_test

// Shared fixtures of the HTTP API tests. Every test drives the real handler returned by api.New
// over a real loopback socket (httptest.NewServer), backed by a real core.Service and engine.
//
// Conventions (all tests follow them):
//   - time is a fakeClock that starts at t0 and moves only when a test advances it, so pending-
//     selection TTLs and booking ages are exact and nothing reads the wall clock;
//   - the service is seeded (Seed 1), so generated selection ids, tie-breaks and random hashes
//     reproduce run after run;
//   - KV-event listeners are never started: tests either turn KV events off (the approximate
//     index, fed by bookings) or register workers with events on but never call
//     EnableKVEvents, so no ZMQ socket is opened;
//   - bodies are compared either as exact text (when the shape is the point) or decoded with
//     UseNumber, so 64-bit hashes are compared without float rounding.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// t0 is the fixed start of every test clock.
var t0 = time.Unix(1_700_000_000, 0).UTC()

// fakeClock is a manually advanced clock, safe for concurrent use (the service reads it under
// its own lock from handler goroutines while the test goroutine advances it).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

// Now returns the current fake time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// harness is one service behind one real HTTP server.
//
// Ownership: the harness owns svc and srv; both are closed by t.Cleanup. The client never
// follows redirects, so a redirect shows up as its own 3xx status instead of being hidden.
type harness struct {
	t      testing.TB
	svc    *core.Service
	srv    *httptest.Server
	clock  *fakeClock
	client *http.Client
}

// on returns a view of the harness that reports failures to t: subtests must use it, since a
// failure may only stop the goroutine of the test it is reported to.
func (h *harness) on(t testing.TB) *harness {
	c := *h
	c.t = t
	return &c
}

// setup configures a harness before it starts.
type setup struct {
	kvEvents bool                 // index from (never started) ZMQ listeners instead of bookings
	edit     func(*engine.Config) // further configuration edits
	opts     []core.Option
}

// newHarness starts a server over a fresh seeded service with KV events off (approximate
// index), the configuration most tests want: bookings feed the index, so overlap is observable
// without any ZMQ traffic.
func newHarness(t testing.TB) *harness { return newHarnessWith(t, setup{}) }

// newHarnessWith starts a server with the given setup.
func newHarnessWith(t testing.TB, s setup) *harness {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = s.kvEvents
	if s.edit != nil {
		s.edit(&cfg)
	}
	clock := newFakeClock()
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Clock: clock.Now}, s.opts...)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	srv := httptest.NewServer(api.New(svc, api.Options{}))
	t.Cleanup(func() {
		srv.Close()
		_ = svc.Close()
	})
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &harness{t: t, svc: svc, srv: srv, clock: clock, client: client}
}

// reply is one HTTP response, fully read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// String renders the reply for failure messages.
func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends a request. A non-empty body is sent as application/json; pass header overrides
// (including an empty Content-Type to send none) in hdr.
func (h *harness) do(method, path, body string, hdr ...string) reply {
	h.t.Helper()
	return h.doBytes(method, path, []byte(body), hdr...)
}

// doBytes is do with a byte body (large bodies avoid a string copy).
func (h *harness) doBytes(method, path string, body []byte, hdr ...string) reply {
	h.t.Helper()
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatalf("new request %s %s: %v", method, path, err)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// must sends a request and fails the test unless the status is want; it returns the body.
func (h *harness) must(want int, method, path, body string, hdr ...string) []byte {
	h.t.Helper()
	r := h.do(method, path, body, hdr...)
	if r.status != want {
		h.t.Fatalf("%s %s %s: got %s, want status %d", method, path, body, r, want)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		h.t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return r.body
}

// obj sends a request, checks the status and decodes a JSON object body.
func (h *harness) obj(want int, method, path, body string, hdr ...string) map[string]any {
	h.t.Helper()
	var m map[string]any
	decodeInto(h.t, h.must(want, method, path, body, hdr...), &m)
	return m
}

// arr sends a request, checks the status and decodes a JSON array body.
func (h *harness) arr(want int, method, path, body string) []any {
	h.t.Helper()
	var a []any
	decodeInto(h.t, h.must(want, method, path, body), &a)
	if a == nil {
		h.t.Fatalf("%s %s: body is null, want a JSON array", method, path)
	}
	return a
}

// wantError checks an error reply: the status, the {"error": ...} envelope with no other key,
// and that the message contains every fragment.
func (h *harness) wantError(r reply, status int, fragments ...string) {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("got %s, want status %d", r, status)
	}
	var m map[string]any
	decodeInto(h.t, r.body, &m)
	msg, ok := m["error"].(string)
	if !ok || len(m) != 1 {
		h.t.Fatalf("error body %s: want exactly {\"error\": string}", r.body)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			h.t.Fatalf("error %q does not mention %q", msg, f)
		}
	}
}

// decodeInto decodes b strictly into v with numbers kept as json.Number.
func decodeInto(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after JSON value in %s", b)
	}
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// wantKeys fails unless m has exactly the given keys.
func wantKeys(t testing.TB, what string, m map[string]any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keys(m); !slices.Equal(got, want) {
		t.Fatalf("%s keys = %v, want %v", what, got, want)
	}
}

// num returns a JSON number field as its decimal text ("" when absent or not a number).
func num(m map[string]any, k string) string {
	if n, ok := m[k].(json.Number); ok {
		return n.String()
	}
	return ""
}

// sub returns a nested object field (nil when absent).
func sub(m map[string]any, k string) map[string]any {
	o, _ := m[k].(map[string]any)
	return o
}

// nums renders a JSON array of numbers as decimal texts.
func nums(t testing.TB, v any) []string {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a JSON array", v)
	}
	out := make([]string, len(a))
	for i, x := range a {
		n, ok := x.(json.Number)
		if !ok {
			t.Fatalf("element %d of %v is not a number", i, v)
		}
		out[i] = n.String()
	}
	return out
}

// worker returns a POST /workers body for a complete single-rank worker with block size bs in
// model/group (empty = omitted, so the defaults apply), plus extra raw JSON members.
func worker(id uint64, model, group string, bs int, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"worker_id":%d,"endpoint":"http://w%d:8000","block_size":%d`, id, id, bs)
	if model != "" {
		fmt.Fprintf(&b, `,"model_name":%q`, model)
	}
	if group != "" {
		fmt.Fprintf(&b, `,"routing_group":%q`, group)
	}
	for _, e := range extra {
		b.WriteString(",")
		b.WriteString(e)
	}
	b.WriteString("}")
	return b.String()
}

// addWorker registers a worker and checks it became schedulable.
func (h *harness) addWorker(body string) map[string]any {
	h.t.Helper()
	rec := h.obj(http.StatusCreated, "POST", "/workers", body)
	if rec["lifecycle"] != "schedulable" {
		h.t.Fatalf("worker %s: lifecycle %v, reasons %v", body, rec["lifecycle"], rec["not_schedulable_reasons"])
	}
	return rec
}

// tokens returns the JSON array text of the tokens lo..hi-1.
func tokens(lo, hi int) string {
	parts := make([]string, 0, hi-lo)
	for i := lo; i < hi; i++ {
		parts = append(parts, fmt.Sprint(i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// load is one rank's /loads row reduced to the triple the spec's examples use.
type load struct{ requests, decodeBlocks, prefillTokens string }

// loadOf returns (active_requests, potential_decode_blocks, potential_prefill_tokens) of one rank
// from GET /loads, failing when the rank is absent.
func (h *harness) loadOf(model, group string, worker, rank uint64) load {
	h.t.Helper()
	for _, p := range h.arr(http.StatusOK, "GET", "/loads", "") {
		pm := p.(map[string]any)
		if pm["model_name"] != model || pm["routing_group"] != group {
			continue
		}
		for _, l := range pm["loads"].([]any) {
			lm := l.(map[string]any)
			if num(lm, "worker_id") == fmt.Sprint(worker) && num(lm, "dp_rank") == fmt.Sprint(rank) {
				return load{num(lm, "active_requests"), num(lm, "potential_decode_blocks"), num(lm, "potential_prefill_tokens")}
			}
		}
	}
	h.t.Fatalf("no /loads row for %s/%s worker %d rank %d", model, group, worker, rank)
	return load{}
}

// snapshot is the observable state that a rejected request must leave untouched.
type snapshot struct{ workers, loads, dump string }

// snap reads GET /workers, GET /loads and GET /dump.
func (h *harness) snap() snapshot {
	h.t.Helper()
	return snapshot{
		workers: string(h.must(http.StatusOK, "GET", "/workers", "")),
		loads:   string(h.must(http.StatusOK, "GET", "/loads", "")),
		dump:    string(h.must(http.StatusOK, "GET", "/dump", "")),
	}
}
