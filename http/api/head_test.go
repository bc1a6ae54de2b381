package api_test

// HEAD is served wherever GET is (axum's rule): same status and headers as GET, no body. HEAD
// on a path that serves no GET is 405 with the path's Allow header.

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvselect/kvselect/http/api"
)

// TestHeadOnEveryGetRoute compares HEAD with GET on every GET route, over a real socket, on a
// service with a worker, a booking and metrics enabled.
func TestHeadOnEveryGetRoute(t *testing.T) {
	h := newHarness(t)
	// A second server over the same service, with /metrics.
	srv := httptest.NewServer(api.New(h.svc, api.Options{Metrics: api.NewMetrics(h.svc)}))
	t.Cleanup(srv.Close)
	msrv := *h
	msrv.srv, msrv.client = srv, srv.Client()
	h.addWorker(worker(1, "", "", 4))
	h.obj(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"r1","token_ids":[1,2,3,4]}`)

	// Every GET route of the table router_test.go keeps for all routes, plus /metrics; the
	// count check below stops the loop from passing vacuously if that table changes shape.
	gets := 0
	for _, rt := range append(allRoutes, struct{ method, path string }{"GET", "/metrics"}) {
		if rt.method != http.MethodGet {
			continue
		}
		gets++
		hs := h
		if rt.path == "/metrics" {
			hs = &msrv
		}
		get, head := hs.do("GET", rt.path, ""), hs.do("HEAD", rt.path, "")
		if head.status != get.status || head.status != http.StatusOK {
			t.Errorf("HEAD %s: %d, GET %d, want both 200", rt.path, head.status, get.status)
		}
		if len(head.body) != 0 {
			t.Errorf("HEAD %s: body %q, want none", rt.path, head.body)
		}
		if g, hd := get.header.Get("Content-Type"), head.header.Get("Content-Type"); g != hd || g == "" {
			t.Errorf("HEAD %s: Content-Type %q, GET %q", rt.path, hd, g)
		}
		// A GET body buffered whole has a Content-Length; HEAD reports the same one.
		if g, hd := get.header.Get("Content-Length"), head.header.Get("Content-Length"); g != hd {
			t.Errorf("HEAD %s: Content-Length %q, GET %q", rt.path, hd, g)
		}
	}
	if gets < 7 {
		t.Fatalf("only %d GET routes checked", gets)
	}
	// HEAD where no GET is served: 405 naming the path's methods.
	for path, allow := range map[string]string{"/select": "POST", "/reservations/r1": "DELETE", "/workers/1": "DELETE, PATCH"} {
		r := h.do("HEAD", path, "")
		if r.status != http.StatusMethodNotAllowed || !sameMethods(r.header.Get("Allow"), allow) {
			t.Errorf("HEAD %s: %d Allow %q, want 405 Allow %q", path, r.status, r.header.Get("Allow"), allow)
		}
	}
}
