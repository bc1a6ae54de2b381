package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// TestHardSessionAffinityOverHTTP: with session affinity on and the default (hard) mode, a
// select_and_reserve whose allowed_worker_ids exclude the session's bound worker, and a replayed
// /select whose session has since moved, answer 400 with Dynamo's message and book nothing.
func TestHardSessionAffinityOverHTTP(t *testing.T) {
	h := newHarnessWith(t, setup{edit: func(c *engine.Config) { c.SessionAffinityTTL = time.Minute }})
	h.addWorker(worker(1, "", "", 4))
	h.addWorker(worker(2, "", "", 4))

	first := h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r1","session_id":"s","token_ids":`+tokens(0, 16)+`}`)
	bound := num(first, "worker_id")
	other := map[string]string{"1": "2", "2": "1"}[bound]
	h.must(http.StatusOK, "DELETE", "/reservations/r1", ``)
	h.wantError(h.do("POST", "/select_and_reserve", `{"selection_id":"r2","session_id":"s","allowed_worker_ids":[`+other+`],"token_ids":`+tokens(0, 16)+`}`),
		http.StatusBadRequest, fmt.Sprintf("session s is bound to worker %s, not %s", bound, other))

	// Two-phase: /select caches a worker, then the session is bound to the other one.
	sel := h.obj(http.StatusOK, "POST", "/select", `{"selection_id":"pending","session_id":"t","token_ids":`+tokens(100, 116)+`}`)
	cached := num(sel, "worker_id")
	moved := map[string]string{"1": "2", "2": "1"}[cached]
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r3","session_id":"t","allowed_worker_ids":[`+moved+`],"token_ids":`+tokens(100, 116)+`}`)
	h.must(http.StatusOK, "DELETE", "/reservations/r3", ``)
	h.wantError(h.do("POST", "/reservations", `{"selection_id":"pending"}`),
		http.StatusBadRequest, fmt.Sprintf("session t is bound to worker %s, not %s", moved, cached))
	for _, w := range []uint64{1, 2} {
		if l := h.loadOf("default", "default", w, 0); l != (load{"0", "0", "0"}) {
			t.Fatalf("worker %d load %+v after the rejected bookings, want none", w, l)
		}
	}
}
