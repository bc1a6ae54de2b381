package api_test

// Routing quality over a real /metrics scrape for Ray's two-phase flow: POST /select with a
// selection_id books nothing and counts nothing; the replayed POST /reservations that books it
// counts it once, with the overlap the /select chose on; a rejected replay counts nothing.

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/kvselect/kvselect/http/api"
)

func TestRoutingQualityCountsTwoPhaseBookings(t *testing.T) {
	svc := newService(t)
	srv := httptest.NewServer(api.New(svc, api.Options{Metrics: api.NewMetrics(svc)}))
	defer srv.Close()
	const js = "application/json"
	for _, id := range []int{1, 2} {
		if code, body := post(t, srv.URL, "/workers", js, fmt.Sprintf(`{"worker_id":%d,"endpoint":"http://w%d:8000","block_size":4}`, id, id)); code != 201 {
			t.Fatalf("register: %d %s", code, body)
		}
	}
	const lbl = `{model_name="default",routing_group="default"}`
	expect := func(step string, bookings, achieved, available, notMax int) {
		t.Helper()
		text := scrape(t, srv.URL)
		for series, v := range map[string]int{
			"kvselect_routing_bookings_total" + lbl:                 bookings,
			"kvselect_routing_achieved_overlap_tokens_total" + lbl:  achieved,
			"kvselect_routing_available_overlap_tokens_total" + lbl: available,
			"kvselect_routing_not_max_overlap_total" + lbl:          notMax,
		} {
			if got := metricValue(text, series); got != fmt.Sprint(v) {
				t.Errorf("%s: %s = %q, want %d", step, series, got, v)
			}
		}
	}

	// KV events are off, so a booking caches its prompt (2 blocks, 8 tokens) on its rank.
	prompt := `"token_ids":[1,2,3,4,5,6,7,8]`
	code, body := post(t, srv.URL, "/select_and_reserve", js, `{`+prompt+`,"selection_id":"one"}`)
	if code != 200 {
		t.Fatalf("select_and_reserve: %d %s", code, body)
	}
	expect("select_and_reserve on an empty cache", 1, 0, 0, 0)
	var cached string
	for _, l := range svc.Loads("", "") {
		for _, r := range l.Loads {
			if r.ActiveRequests > 0 {
				cached = fmt.Sprint(r.WorkerID)
			}
		}
	}
	other := map[string]string{"1": "2", "2": "1"}[cached]

	// Two-phase onto the cached rank: the /select moves nothing, the replay 8 of 8.
	if code, body := post(t, srv.URL, "/select", js, `{`+prompt+`,"selection_id":"two"}`); code != 200 {
		t.Fatalf("select: %d %s", code, body)
	}
	expect("after /select", 1, 0, 0, 0)
	if code, body := post(t, srv.URL, "/reservations", js, `{"selection_id":"two"}`); code != 201 {
		t.Fatalf("replay: %d %s", code, body)
	}
	expect("after the replay", 2, 8, 8, 0)

	// Two-phase pinned away from the cached rank: 0 of 8, not the max-overlap rank.
	if code, body := post(t, srv.URL, "/select", js, `{`+prompt+`,"selection_id":"three","pinned_worker":{"worker_id":`+other+`,"dp_rank":0}}`); code != 200 {
		t.Fatalf("pinned select: %d %s", code, body)
	}
	expect("after the pinned /select", 2, 8, 8, 0)
	if code, body := post(t, srv.URL, "/reservations", js, `{"selection_id":"three"}`); code != 201 {
		t.Fatalf("pinned replay: %d %s", code, body)
	}
	expect("after the pinned replay", 3, 8, 16, 1)

	// The spent selection replayed again, and one never selected: 404, nothing counted.
	for _, id := range []string{"three", "never"} {
		if code, body := post(t, srv.URL, "/reservations", js, `{"selection_id":"`+id+`"}`); code != 404 {
			t.Fatalf("replay of %s: %d %s, want 404", id, code, body)
		}
	}
	expect("after rejected replays", 3, 8, 16, 1)
}
