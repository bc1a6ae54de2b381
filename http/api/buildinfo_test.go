package api_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// kvselect_build_info is exposed on /metrics with the registered labels and the value 1.
func TestBuildInfoMetric(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Close() }()
	m := api.NewMetrics(svc)
	m.RegisterBuildInfo("v1.2.3", "go1.26.0", "abc123")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	want := `kvselect_build_info{goversion="go1.26.0",revision="abc123",version="v1.2.3"} 1`
	if !strings.Contains(string(body), want) {
		t.Fatalf("no %s in /metrics:\n%s", want, body)
	}
}
