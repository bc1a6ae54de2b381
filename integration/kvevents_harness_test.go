package integration

// Shared fixtures of the KV-event ingestion tests (kvevents_*_test.go).
//
// What is real: the HTTP handler (api.New over a loopback httptest.Server), the service and its
// engine (core.New + EnableKVEvents + OpenGate), the ZMQ listeners, and the publisher — the
// faithful pyzmq vLLM publisher of bus/kvlisten/testdata, run as a child process and driven over
// its documented stdin command protocol. Nothing is mocked; every socket is on 127.0.0.1.
//
// Synchronisation: tests never sleep to wait. They poll what the service exposes (the listener
// watermark in GET /workers, /overlap_scores rows) with a deadline through waitFor. A publisher
// may lose the first batches sent before the subscription reaches it (ZeroMQ's slow joiner), so
// every "publish then observe" step nudges: it re-publishes an empty batch while it waits, and
// the listener repairs whatever was lost through replay where the worker has a replay endpoint.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"

	"github.com/kvselect/kvselect/internal/pyzmqtest"
)

// kvTimeout bounds every KV-event poll. Generous: two cores are shared by several test runs,
// and a listener that lost its connection redials with backoff.
const kvTimeout = 60 * time.Second // internal/poll.Generous

// kvPublisherScript is the pyzmq publisher owned by bus/kvlisten; reused, not copied.
const kvPublisherScript = "../bus/kvlisten/testdata/vllm_publisher.py"

// kvPython returns an interpreter that imports zmq and msgpack (see pyzmqtest.Python).
func kvPython(t *testing.T) string { return pyzmqtest.Python(t) }

// kvPub is one running vllm_publisher.py process (see pyzmqtest.Process for the protocol).
//
// Ownership: the test goroutine owns it; commands are strictly request/reply, so only one
// goroutine may call do. stop is registered with t.Cleanup and is idempotent.
type kvPub struct {
	t        *testing.T
	proc     *pyzmqtest.Process
	pubEP    string // tcp://127.0.0.1:port the PUB is bound to
	replayEP string // "" without --replay
	lastSeq  int64  // last sequence number published by this incarnation (-1: none)
}

// startKVPub launches the script with args (use port 0 for fresh ports, or fixed endpoints to
// restart at the same address) and waits for its READY line.
func startKVPub(t *testing.T, py string, args ...string) *kvPub {
	t.Helper()
	proc := pyzmqtest.Start(t, py, kvPublisherScript, kvTimeout, args...)
	return &kvPub{t: t, proc: proc, pubEP: proc.PubEP, replayEP: proc.ReplayEP, lastSeq: -1}
}

// do sends one command line and returns the text after "OK"; anything else fails the test.
func (p *kvPub) do(line string) string {
	p.t.Helper()
	return p.proc.Do(line)
}

// publish builds a real vLLM KVEventBatch from spec (the script's batch JSON) and publishes it;
// it returns the batch's sequence number.
func (p *kvPub) publish(spec map[string]any) uint64 {
	p.t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		p.t.Fatal(err)
	}
	f := strings.Fields(p.do("batch " + string(b)))
	seq, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		p.t.Fatalf("batch reply %q: %v", f, err)
	}
	p.lastSeq = int64(seq)
	return seq
}

// empty publishes a batch without events (a valid vLLM batch; used to nudge a listener).
func (p *kvPub) empty(dpRank any) uint64 {
	return p.publish(map[string]any{"events": []any{}, "dp_rank": dpRank})
}

// replays returns how many replay requests the publisher has served.
func (p *kvPub) replays() int {
	p.t.Helper()
	for _, kv := range strings.Fields(p.do("stats")) {
		if v, ok := strings.CutPrefix(kv, "replays="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				p.t.Fatal(err)
			}
			return n
		}
	}
	p.t.Fatal("stats without replays=")
	return 0
}

// stop ends the script (closing its sockets with linger 0) and reaps it; idempotent.
func (p *kvPub) stop() { p.proc.Stop() }

// The three event builders below produce the script's batch JSON events (see the docstring
// of vllm_publisher.py); the script turns them into msgspec-identical msgpack in either form.

// stored is one BlockStored event for the script's batch JSON: blocks consecutive blocks of
// tokens starting at block index from, named by hashes[from:from+blocks], chained to
// hashes[from-1] when from > 0.
func stored(tokens []uint32, hashes []uint64, bs, from, blocks int) map[string]any {
	ev := map[string]any{
		"type":         "BlockStored",
		"block_hashes": hashes[from : from+blocks],
		"token_ids":    tokens[from*bs : (from+blocks)*bs],
		"block_size":   bs,
		"medium":       "GPU",
	}
	if from > 0 {
		ev["parent_block_hash"] = hashes[from-1]
	}
	return ev
}

// removed is one BlockRemoved event.
func removed(hashes ...uint64) map[string]any {
	return map[string]any{"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
}

// cleared is one AllBlocksCleared event.
func cleared() map[string]any { return map[string]any{"type": "AllBlocksCleared"} }

// kvHarness is one service with KV events on, behind the real HTTP handler on a loopback
// server. It owns both and closes them in t.Cleanup.
type kvHarness struct {
	svc *core.Service
	srv *httptest.Server
}

// kvLogger logs to stderr with -v, and discards otherwise.
func kvLogger() *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newKVHarness starts the service exactly as cmd/kvselect wires it for a single node with KV
// events on (EnableKVEvents, then OpenGate since there is no startup recovery), behind the
// real handler. The fixed seed makes selection tie-breaks reproducible.
func newKVHarness(t testing.TB) *kvHarness {
	t.Helper()
	svc, err := core.New(core.Config{Engine: engine.DefaultConfig(), Logger: kvLogger(), Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	svc.EnableKVEvents()
	svc.OpenGate()
	srv := httptest.NewServer(api.New(svc, api.Options{Logger: kvLogger()}))
	t.Cleanup(func() {
		srv.Close()
		_ = svc.Close()
	})
	return &kvHarness{svc: svc, srv: srv}
}

// call sends body as JSON and decodes the answer into out (when non-nil and 2xx). It returns
// the status and the raw body. Numbers decode with UseNumber semantics into typed fields, so
// 64-bit values survive. Transport errors fail the test: the server is in-process.
func (h *kvHarness) call(t testing.TB, method, path string, body, out any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, b
}

// must is call that fails unless the status is want.
func (h *kvHarness) must(t testing.TB, want int, method, path string, body, out any) {
	t.Helper()
	if code, b := h.call(t, method, path, body, out); code != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
}

// kvListener is a listener's state as GET /workers shows it.
type kvListener struct {
	Endpoint  string  `json:"endpoint"`
	Status    string  `json:"status"`
	LastError string  `json:"last_error"`
	Watermark *uint64 `json:"watermark"`
}

// kvRecord is the part of a catalog record these tests look at. Decode each answer into a
// fresh value: encoding/json leaves fields that are absent from the body (omitempty reasons,
// listeners) untouched, so reusing a value would carry stale data over.
type kvRecord struct {
	WorkerID  uint64                `json:"worker_id"`
	Lifecycle string                `json:"lifecycle"`
	Reasons   []string              `json:"not_schedulable_reasons"`
	Listeners map[string]kvListener `json:"listeners"`
}

// worker returns worker id's record from GET /workers (ok false when absent).
func (h *kvHarness) worker(t testing.TB, id uint64) (kvRecord, bool) {
	t.Helper()
	var recs []kvRecord
	h.must(t, http.StatusOK, "GET", "/workers", nil, &recs)
	for _, r := range recs {
		if r.WorkerID == id {
			return r, true
		}
	}
	return kvRecord{}, false
}

// listener returns the listener of (id, rank) from GET /workers.
func (h *kvHarness) listener(t testing.TB, id uint64, rank int) (kvListener, bool) {
	t.Helper()
	r, ok := h.worker(t, id)
	if !ok {
		return kvListener{}, false
	}
	l, ok := r.Listeners[strconv.Itoa(rank)]
	return l, ok
}

// waitActive waits until (id, rank)'s listener follows endpoint and reports active.
func (h *kvHarness) waitActive(t testing.TB, id uint64, rank int, endpoint string) {
	t.Helper()
	waitFor(t, kvTimeout, func() error {
		l, ok := h.listener(t, id, rank)
		switch {
		case !ok:
			return fmt.Errorf("worker %d rank %d has no listener", id, rank)
		case l.Endpoint != endpoint || l.Status != "active":
			return fmt.Errorf("worker %d rank %d listener %+v, want active on %s", id, rank, l, endpoint)
		}
		return nil
	})
}

// waitWatermark waits until (id, rank)'s listener has applied seq; while it waits it re-publishes
// an empty batch every 200 ms through nudge (nil: no nudging), so a batch dropped before the
// subscription took effect is revealed as a gap and replayed. It returns the final watermark.
func (h *kvHarness) waitWatermark(t testing.TB, id uint64, rank int, seq uint64, nudge func() uint64) uint64 {
	t.Helper()
	want, last := seq, time.Now()
	var got uint64
	waitFor(t, kvTimeout, func() error {
		l, _ := h.listener(t, id, rank)
		if l.Watermark != nil && *l.Watermark >= want {
			got = *l.Watermark
			return nil
		}
		if nudge != nil && time.Since(last) > 200*time.Millisecond {
			want, last = nudge(), time.Now()
		}
		return fmt.Errorf("worker %d rank %d listener %+v has not applied seq %d", id, rank, l, want)
	})
	return got
}

// overlap returns device_blocks per "worker/rank" for a prompt from POST /overlap_scores.
func (h *kvHarness) overlap(t testing.TB, model string, tokens []uint32) map[string]int {
	t.Helper()
	var out struct {
		Workers []struct {
			WorkerID     uint64 `json:"worker_id"`
			DPRank       uint32 `json:"dp_rank"`
			DeviceBlocks int    `json:"device_blocks"`
		} `json:"workers"`
	}
	h.must(t, http.StatusOK, "POST", "/overlap_scores", map[string]any{"model_name": model, "token_ids": tokens}, &out)
	m := make(map[string]int, len(out.Workers))
	for _, r := range out.Workers {
		m[fmt.Sprintf("%d/%d", r.WorkerID, r.DPRank)] = r.DeviceBlocks
	}
	return m
}

// selected is the part of a /select answer these tests check.
type selected struct {
	WorkerID uint64 `json:"worker_id"`
	DPRank   uint32 `json:"dp_rank"`
	Overlap  struct {
		LongestMatched int `json:"longest_matched"`
	} `json:"overlap"`
}

// choose runs POST /select for a prompt.
func (h *kvHarness) choose(t testing.TB, model string, tokens []uint32) selected {
	t.Helper()
	var s selected
	h.must(t, http.StatusOK, "POST", "/select", map[string]any{"model_name": model, "token_ids": tokens}, &s)
	return s
}

// waitOverlap polls /overlap_scores until want(rows) holds, nudging the publisher while it
// waits (see waitWatermark). It reports the last rows on timeout.
func (h *kvHarness) waitOverlap(t testing.TB, model string, tokens []uint32, nudge func() uint64, want map[string]int) {
	t.Helper()
	last := time.Now()
	waitFor(t, kvTimeout, func() error {
		got := h.overlap(t, model, tokens)
		for k, v := range want {
			if got[k] != v {
				if nudge != nil && time.Since(last) > 200*time.Millisecond {
					nudge()
					last = time.Now()
				}
				return fmt.Errorf("overlap %v, want %v", got, want)
			}
		}
		return nil
	})
}

// kvTokens returns n distinct tokens for prompt number p. Prompts never share a token, so
// their blocks never share a radix node and overlaps of different prompts are independent.
func kvTokens(p, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(p*100_000 + i + 1)
	}
	return out
}

// kvHashes returns n engine block hashes for prompt number p, above 2^63 so that they travel as
// msgpack uint64 like vLLM's, distinct per prompt.
func kvHashes(p, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = 0xdab89baa7b5857c0 + uint64(p)<<20 + uint64(i)
	}
	return out
}

// hostPort strips the tcp:// scheme of a ZMQ endpoint.
func hostPort(ep string) string { return strings.TrimPrefix(ep, "tcp://") }

// itoa formats a worker id for paths and overlap keys.
func itoa(id uint64) string { return strconv.FormatUint(id, 10) }
