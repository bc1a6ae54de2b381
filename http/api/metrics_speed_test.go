package api_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/http/api"
)

// TestPrefillSpeedMetric: bookings whose prefill_complete comes 80 ms later teach the rank a
// speed; /metrics exports it as a histogram over the partition's ranks with a sample count, and
// GET /loads reports it per rank.
func TestPrefillSpeedMetric(t *testing.T) {
	h := newHarness(t)
	h.addWorker(worker(1, "", "", 4))
	// Two prefills in a row on one rank: a sample is learned one completion late (a batching
	// engine's simultaneous completions merge into one), so the second teaches the first.
	for i, id := range []string{"s1", "s2"} {
		tokens := strings.Repeat(strconv.Itoa(i+1)+",", 15) + "99" // distinct prompts: both prefill
		h.must(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"`+id+`","token_ids":[`+tokens+`]}`)
		h.clock.Advance(80 * time.Millisecond)
		h.must(http.StatusOK, "POST", "/reservations/"+id+"/prefill_complete", "")
	}

	rec := httptest.NewRecorder()
	api.New(h.svc, api.Options{Metrics: api.NewMetrics(h.svc)}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`kvselect_prefill_seconds_per_1k_tokens_count{model_name="default",routing_group="default"} 1`,
		`kvselect_prefill_speed_samples_total{model_name="default",routing_group="default"} 1`,
		`kvselect_prefill_context_share{model_name="default",routing_group="default"} 0`, // 2 samples: the prior
		// In order, one at a time: nothing overtaken, arrival order.
		`kvselect_prefill_overtaken_share{model_name="default",routing_group="default"} 0`,
		`kvselect_prefill_reordered{model_name="default",routing_group="default"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%.3000s", want, body)
		}
	}

	// The rank learned from the 80 ms interval: slower than the prior.
	var learned int
	for _, p := range h.arr(http.StatusOK, "GET", "/loads", "") {
		for _, sp := range p.(map[string]any)["prefill_speeds"].([]any) {
			m := sp.(map[string]any)
			if num(m, "samples") == "1" {
				learned++
				if b, err := strconv.ParseFloat(num(m, "ms_per_token"), 64); err != nil || !(b > 0.01518344) {
					t.Errorf("80 ms for 16 tokens learned %v ms/token, not slower than the prior", b)
				}
			}
		}
	}
	if learned != 1 {
		t.Fatalf("%d ranks learned, want 1", learned)
	}
}
