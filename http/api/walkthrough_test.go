package api_test

// TestWalkthrough generates testdata/walkthrough.md, the README's three-worker walk-through: the
// exact curl commands and the responses this service returns to them. Without -update it
// compares the file with what the service answers now, so the document cannot drift from the
// code; with -update it rewrites the file:
//
//	go test ./http/api -run TestWalkthrough -update
//
// The service runs with a fixed seed and a fake clock, so generated selection ids and random
// tie-breaks are identical on every run.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

var update = flag.Bool("update", false, "rewrite testdata/walkthrough.md from the service's current answers")

const walkthroughFile = "testdata/walkthrough.md"

// walkStep is one documented call. Paths and bodies may use {id}, replaced by the selection_id
// of the latest /select_and_reserve answer.
type walkStep struct {
	heading string // markdown heading of the step ("" continues the previous section)
	text    string // prose before the command
	method  string
	path    string
	body    string
	status  int // the answer the step must get (checked before anything is written)
}

// walkthroughSteps is the scenario: three workers, a Ray select-then-reserve flow, an EPP
// select_and_reserve of the conversation's next turn that hits the cached prefix, lifecycle
// reports and inspection.
func walkthroughSteps() []walkStep {
	promptA := tokens(0, 32) // two full blocks of 16
	promptB := tokens(0, 48) // promptA plus one block
	return []walkStep{
		{"Liveness and readiness", "`/health` is process liveness. `/ready` is 503 until some worker is schedulable, with the same body shape as when ready.",
			"GET", "/health", "", 200},
		{"", "", "GET", "/ready", "", 503},

		{"Register three workers", "Worker 1 has two data-parallel ranks and per-rank KV-event endpoints, shaped like the seed document's example. " +
			"POST /workers is an upsert and answers 201 with the catalog record: absent optional scalars are `null`, `taints` and `topology_domains` are always present.",
			"POST", "/workers", `{"worker_id":1,"model_name":"model","routing_group":"default","endpoint":"http://worker-1:8000","block_size":16,` +
				`"data_parallel_start_rank":0,"data_parallel_size":2,"kv_events_endpoints":{"0":"tcp://worker-1:5557","1":"tcp://worker-1:5558"}}`, 201},
		{"", "Worker 2 declares its capacities (used by `decode_busy` and advisory `worker_load`).",
			"POST", "/workers", `{"worker_id":2,"model_name":"model","endpoint":"http://worker-2:8000","block_size":16,"max_num_batched_tokens":8192,"total_kv_blocks":4096}`, 201},
		{"", "Worker 3 carries a taint that requests can require or prefer.",
			"POST", "/workers", `{"worker_id":3,"model_name":"model","endpoint":"http://worker-3:8000","block_size":16,"taints":["spot"]}`, 201},
		{"", "Now the service is ready.", "GET", "/ready", "", 200},

		{"Ray: select, then reserve", "A query-only `/select` with a `selection_id` books nothing but caches the booking inputs. " +
			"The answer omits `sequence_hashes`, `isl_tokens` and `track_prefill_tokens`; `overlap.dp` has one decimal-string key per rank of the chosen worker.",
			"POST", "/select", `{"selection_id":"select-123","model_name":"model","routing_group":"default","token_ids":` + promptA + `,"session_id":"session-abc"}`, 200},
		{"", "The caller sends the request to the chosen worker, then books it by replaying the cached selection.",
			"POST", "/reservations", `{"selection_id":"select-123","model_name":"model","routing_group":"default"}`, 201},
		{"", "A second replay of the same id is a miss.",
			"POST", "/reservations", `{"selection_id":"select-123","model_name":"model","routing_group":"default"}`, 404},
		{"", "The booking shows in the active load: one request, two blocks, 32 prefill tokens.",
			"GET", "/loads?model_name=model", "", 200},
		{"", "The worker reports prefill completion and one generated block.",
			"POST", "/reservations/select-123/prefill_complete", `{}`, 200},
		{"", "", "POST", "/reservations/select-123/output_block", `{}`, 200},
		{"", "", "GET", "/loads?model_name=model", "", 200},
		{"", "The request finishes and the worker frees it: the rank's load is back to zero. With KV events off its prompt stays in the index until `DYN_ROUTER_TTL_SECS`, as the worker's cache would keep it.",
			"DELETE", "/reservations/select-123", "", 200},

		{"Endpoint picker: select and reserve atomically", "`/select_and_reserve` books in the same call and echoes the booking inputs; " +
			"without a `selection_id` it generates a UUID v4. `sequence_hashes` are signed 64-bit integers. " +
			"With KV events off, bookings feed the index, so this prompt, the conversation's next turn (it extends the first one), finds its first 32 tokens cached.",
			"POST", "/select_and_reserve", `{"model_name":"model","token_ids":` + promptB + `}`, 200},
		{"", "Booking the same id again conflicts.",
			"POST", "/select_and_reserve", `{"selection_id":"{id}","model_name":"model","token_ids":` + promptB + `}`, 409},
		{"", "An advisory selection also reports the chosen rank's projected load.",
			"POST", "/select", `{"model_name":"model","token_ids":` + promptB + `,"advisory":true,"allowed_worker_ids":[2]}`, 200},

		{"Inspection", "Per-rank tiered overlap for a prompt, in blocks: a row for every schedulable rank, with hits or not.",
			"POST", "/overlap_scores", `{"model_name":"model","token_ids":` + promptB + `}`, 200},
		{"", "Projected load of every rank if it received the prompt.",
			"POST", "/potential_loads", `{"model_name":"model","token_ids":` + promptB + `}`, 200},

		{"Finish", "Freeing the second booking returns every rank to zero load.",
			"POST", "/reservations/{id}/prefill_complete", `{}`, 200},
		{"", "", "DELETE", "/reservations/{id}", "", 200},
		{"", "", "GET", "/loads?model_name=model", "", 200},
		{"", "Lifecycle calls for a freed id are 404.", "DELETE", "/reservations/{id}", "", 404},
	}
}

// TestWalkthrough runs the scenario and renders it; see the file comment.
func TestWalkthrough(t *testing.T) {
	got := renderWalkthrough(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(walkthroughFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(walkthroughFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(walkthroughFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale; regenerate with go test ./http/api -run TestWalkthrough -update\nfirst difference:\n%s", walkthroughFile, firstDiff(want, got))
	}
}

// renderWalkthrough runs every step against a fresh seeded service and returns the document.
func renderWalkthrough(t *testing.T) []byte {
	t.Helper()
	// The binary's defaults: kvselect's selection policy (engine.PolicyKVSelect).
	h := newHarnessWith(t, setup{edit: func(c *engine.Config) { c.Policy = engine.PolicyKVSelect }})
	var doc bytes.Buffer
	doc.WriteString(`# kvselect walk-through: three workers

This file is generated by ` + "`TestWalkthrough`" + ` in ` + "`http/api/walkthrough_test.go`" + ` from the
answers the service actually gives; the test fails when they change. Regenerate it with
` + "`go test ./http/api -run TestWalkthrough -update`" + `.

The service was started with KV events off, so bookings feed the prefix index (Dynamo's
approximate mode) and cache hits are visible without live workers:

` + "```sh" + `
DYN_ROUTER_USE_KV_EVENTS=false kvselect --port 8092
` + "```" + `

Generated selection ids and tie-breaks are random in production; here the service is seeded, so
they are the same on every run.
`)
	// lastID is the selection_id of the latest successful select_and_reserve; {id} in later
	// steps refers to it. Each step's status is checked before it is rendered, so -update can
	// never write a walk-through of a broken flow.
	lastID := ""
	for i, st := range walkthroughSteps() {
		path := strings.ReplaceAll(st.path, "{id}", lastID)
		body := strings.ReplaceAll(st.body, "{id}", lastID)
		r := h.do(st.method, path, body)
		if r.status != st.status {
			t.Fatalf("step %d %s %s: got %s, want status %d", i, st.method, path, r, st.status)
		}
		if st.method == "POST" && path == "/select_and_reserve" && r.status == http.StatusOK {
			var m map[string]any
			decodeInto(t, r.body, &m)
			lastID, _ = m["selection_id"].(string)
		}
		if st.heading != "" {
			fmt.Fprintf(&doc, "\n## %s\n", st.heading)
		}
		if st.text != "" {
			fmt.Fprintf(&doc, "\n%s\n", st.text)
		}
		doc.WriteString("\n```sh\n")
		doc.WriteString(curl(st.method, path, body))
		doc.WriteString("\n```\n\n")
		fmt.Fprintf(&doc, "`%d %s`\n\n```json\n", r.status, http.StatusText(r.status))
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, r.body, "", "  "); err != nil {
			t.Fatalf("step %d: answer is not JSON: %s", i, r.body)
		}
		doc.Write(pretty.Bytes())
		doc.WriteString("\n```\n")
	}
	return doc.Bytes()
}

// curl renders a request as a curl command against a local service.
func curl(method, path, body string) string {
	var b strings.Builder
	b.WriteString("curl -s")
	if method != "GET" {
		b.WriteString(" -X " + method)
	}
	fmt.Fprintf(&b, " 'http://localhost:8092%s'", path)
	if body != "" {
		b.WriteString(" \\\n  -H 'Content-Type: application/json' \\\n  -d '" + body + "'")
	}
	return b.String()
}

// firstDiff shows the first line where two documents differ.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\n file:    %q\n service: %q", i+1, w, g)
		}
	}
	return "(none)"
}
