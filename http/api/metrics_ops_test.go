package api_test

// The operator metrics over a real /metrics scrape: linted by promlint (the linter behind
// `promtool check metrics`), routing-quality counters that follow real bookings, the queue-wait
// histogram's buckets, AIBrix decisions by outcome through the real AIBrix handler, and NATS
// connection state against a real nats-server that is restarted.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/http/aibrix/aibrixcore"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/internal/poll"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue returns the value of the sample line that starts with series ("" if absent).
func metricValue(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return strings.TrimPrefix(l, series+" ")
		}
	}
	return ""
}

func post(t *testing.T, url, path, ctype, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", ctype)
	req.Header.Set("X-Request-Id", "r1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOperatorMetrics(t *testing.T) {
	svc := newService(t)
	m := api.NewMetrics(svc)
	ab, err := aibrix.NewHandler(aibrix.Config{}, aibrixcore.Backend{Svc: svc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.RunServer(t)
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m.WatchNATS(nc)
	srv := httptest.NewServer(api.New(svc, api.Options{Metrics: m, AIBrix: m.InstrumentAIBrix(ab)}))
	defer srv.Close()

	// Two workers, one rank each. With KV events off, bookings feed the index: the first
	// booking of a prompt caches it on the chosen rank, so later bookings of the same prompt
	// find it there.
	for _, id := range []int{1, 2} {
		if code, body := post(t, srv.URL, "/workers", "application/json", fmt.Sprintf(`{"worker_id":%d,"endpoint":"http://w%d:8000","block_size":4}`, id, id)); code != 201 {
			t.Fatalf("register: %d %s", code, body)
		}
	}
	prompt := `"token_ids":[1,2,3,4,5,6,7,8]`
	for i := 0; i < 3; i++ {
		if code, body := post(t, srv.URL, "/select_and_reserve", "application/json", `{`+prompt+`}`); code != 200 {
			t.Fatalf("book: %d %s", code, body)
		}
	}
	// Pinned away from the cached rank: a choice that is not the max-overlap rank.
	var cached string
	for _, l := range svc.Loads("", "") {
		for _, r := range l.Loads {
			if r.ActiveRequests > 0 {
				cached = fmt.Sprint(r.WorkerID)
			}
		}
	}
	other := map[string]string{"1": "2", "2": "1"}[cached]
	// Booking 4 is pinned to the rank without the prompt while the other rank has it: achieved
	// 0 of 8 available. That booking caches the prompt there too, so booking 5, restricted to
	// that worker, achieves all 8 available. Bookings 1-3: 0 of 0, then 8 of 8 twice.
	if code, body := post(t, srv.URL, "/select_and_reserve", "application/json", `{`+prompt+`,"pinned_worker":{"worker_id":`+other+`,"dp_rank":0}}`); code != 200 {
		t.Fatalf("pinned: %d %s", code, body)
	}
	if code, body := post(t, srv.URL, "/select_and_reserve", "application/json", `{`+prompt+`,"allowed_worker_ids":[`+other+`]}`); code != 200 {
		t.Fatalf("allowed: %d %s", code, body)
	}

	// AIBrix: one decision, one problem answer.
	const mt = "application/vnd.aibrix.external-routing+json;version=v1alpha1"
	areq := `{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"r1"},` +
		`"spec":{"model":"llama","policyMode":"Advisory","candidates":[{"id":"default/a","ports":[8000]}]}}`
	if code, body := post(t, srv.URL, "/v1alpha1/select", mt, areq); code != 200 || !strings.Contains(body, `"Selected"`) {
		t.Fatalf("aibrix: %d %s", code, body)
	}
	if code, _ := post(t, srv.URL, "/v1alpha1/select", mt, `{"kind":"nonsense"}`); code == 200 {
		t.Fatal("aibrix accepted nonsense")
	}

	text := scrape(t, srv.URL)
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := map[string]string{
		`kvselect_routing_bookings_total{model_name="default",routing_group="default"}`:                 "5",
		`kvselect_routing_available_overlap_tokens_total{model_name="default",routing_group="default"}`: "32",
		`kvselect_routing_achieved_overlap_tokens_total{model_name="default",routing_group="default"}`:  "24",
		`kvselect_routing_not_max_overlap_total{model_name="default",routing_group="default"}`:          "1",
		`kvselect_routing_sticky_total{model_name="default",routing_group="default"}`:                   "0",
		`kvselect_aibrix_decisions_total{outcome="Selected"}`:                                           "1",
		`kvselect_aibrix_decisions_total{outcome="problem"}`:                                            "1",
		`kvselect_aibrix_decisions_total{outcome="Denied"}`:                                             "0",
		`kvselect_nats_connected`:                               "1",
		`kvselect_router_queue_wait_seconds_bucket{le="60"}`:    "0",
		`kvselect_router_queue_wait_seconds_bucket{le="0.001"}`: "0",
	}
	for series, v := range want {
		if got := metricValue(text, series); got != v {
			t.Errorf("%s = %q, want %q", series, got, v)
		}
	}

	// The NATS server goes away and comes back: connected drops to 0, then reconnects counts.
	opts := natstest.DefaultOptions()
	opts.Port = ns.Addr().(*net.TCPAddr).Port
	natstest.Shutdown(ns)
	poll.Until(t, 30*time.Second, func() error {
		if v := metricValue(scrape(t, srv.URL), "kvselect_nats_connected"); v != "0" {
			return fmt.Errorf("connected = %s after shutdown", v)
		}
		return nil
	})
	natstest.RunServerWithOptions(t, opts)
	poll.Until(t, 30*time.Second, func() error {
		text := scrape(t, srv.URL)
		if c, r := metricValue(text, "kvselect_nats_connected"), metricValue(text, "kvselect_nats_reconnects_total"); c != "1" || r != "1" {
			return fmt.Errorf("connected %s reconnects %s", c, r)
		}
		return nil
	})
	_ = core.QueueWaitBuckets
}
