package api_test

// Router construction: every route registers without a conflict panic, each answers on its
// method (not with the router's own 404/405), the optional /metrics and AIBrix routes appear
// only when configured, and a panicking handler becomes a logged 500.

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/internal/logbuf"
)

// allRoutes is every Dynamo route plus kvselect's replica membership route.
var allRoutes = []struct{ method, path string }{
	{"POST", "/workers"}, {"GET", "/workers"}, {"PATCH", "/workers/1"}, {"DELETE", "/workers/1"},
	{"GET", "/health"}, {"GET", "/ready"}, {"POST", "/select"}, {"POST", "/select_and_reserve"},
	{"POST", "/reservations"}, {"POST", "/reservations/x/prefill_complete"}, {"POST", "/reservations/x/output_block"},
	{"DELETE", "/reservations/x"}, {"GET", "/loads"}, {"POST", "/potential_loads"}, {"POST", "/overlap_scores"},
	{"GET", "/dump"}, {"POST", "/replica_sync/register_peer"}, {"POST", "/replica_sync/deregister_peer"},
	{"GET", "/replica_sync/peers"}, {"GET", "/replica_sync/members"},
}

// newService returns a seeded service with KV events off, closed at cleanup.
func newService(t *testing.T) *core.Service {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Clock: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// TestRouterConstruction builds the handler with every option set and checks every route is
// served by its handler: the answer is never the router's own "route not found" or "method not
// allowed" envelope.
func TestRouterConstruction(t *testing.T) {
	svc := newService(t)
	aibrixCalls := 0
	aibrix := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		aibrixCalls++
		w.WriteHeader(http.StatusTeapot)
	})
	var handler http.Handler
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("api.New panicked: %v", v)
			}
		}()
		handler = api.New(svc, api.Options{Metrics: api.NewMetrics(svc), AIBrix: aibrix, AIBrixPath: "/v1alpha1/route"})
	}()
	// Each route gets {} as a JSON body: whatever its handler answers (often a 4xx for the
	// empty request), it must be the handler answering, and never with a 5xx other than 503.
	for _, rt := range allRoutes {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		handler.ServeHTTP(rec, req)
		body := rec.Body.String()
		if body == `{"error":"route not found"}` || body == `{"error":"method not allowed"}` {
			t.Errorf("%s %s is not routed: %d %s", rt.method, rt.path, rec.Code, body)
		}
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s with {}: %d %s", rt.method, rt.path, rec.Code, body)
		}
	}

	// The configured AIBrix path reaches the AIBrix handler, and /metrics counts the /health
	// request made above (the router test's only 200 on /health).
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("POST", "/v1alpha1/route", nil))
	if rec.Code != http.StatusTeapot || aibrixCalls != 1 {
		t.Fatalf("AIBrix route: %d after %d calls", rec.Code, aibrixCalls)
	}
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `kvselect_http_requests_total{code="200",route="/health"} 1`) {
		t.Fatalf("/metrics: %d, want the /health request counted:\n%.2000s", rec.Code, rec.Body.String())
	}

	// The AIBrix path defaults to /v1alpha1/select.
	handler = api.New(svc, api.Options{AIBrix: aibrix})
	rec = httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("POST", "/v1alpha1/select", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("default AIBrix path: %d", rec.Code)
	}
}

// TestPanicBecomesLogged500 checks that a handler panic is answered with the 500 envelope and
// logged through the injected logger, while http.ErrAbortHandler still aborts the connection.
func TestPanicBecomesLogged500(t *testing.T) {
	svc := newService(t)
	logs := &logbuf.Buffer{}
	boom := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("abort") != "" {
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	})
	srv := httptest.NewServer(api.New(svc, api.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), AIBrix: boom}))
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/v1alpha1/select", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || string(body) != `{"error":"internal server error"}` {
		t.Fatalf("panicking handler: %d %s", resp.StatusCode, body)
	}
	if l := logs.String(); !strings.Contains(l, "handler panic") || !strings.Contains(l, "boom") || !strings.Contains(l, "/v1alpha1/select") {
		t.Fatalf("panic not logged: %q", l)
	}

	// http.ErrAbortHandler is net/http's way to abort a response: it must reach the server
	// (which drops the connection quietly), not be turned into a 500 or logged as a panic.
	resp, err = srv.Client().Post(srv.URL+"/v1alpha1/select?abort=1", "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("ErrAbortHandler answered %d, want an aborted connection", resp.StatusCode)
	}
	if n := strings.Count(logs.String(), "handler panic"); n != 1 {
		t.Fatalf("ErrAbortHandler was logged as a handler panic (%d records)", n)
	}
}
