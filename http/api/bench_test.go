package api_test

// Benchmarks of the HTTP layer over a three-worker partition with a warm index: the cost of one
// request through the real handler, in process (decode, lock, engine, encode) and over a
// loopback socket with keep-alive (adding net/http's own work). Run them short on the shared
// machine:
//
//	go test ./http/api -run '^$' -bench . -benchtime=10000x

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// benchHandler returns the handler over a service with three workers (block size 16) whose
// index holds 64 booked 512-token prompts sharing a 256-token prefix, so selections walk a real
// prefix tree.
func benchHandler(b *testing.B) http.Handler {
	b.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Clock: newFakeClock().Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Close() })
	h := api.New(svc, api.Options{})
	for id := 1; id <= 3; id++ {
		serve(b, h, "POST", "/workers", worker(uint64(id), "", "", 16), http.StatusCreated)
	}
	for i := range 64 {
		serve(b, h, "POST", "/select_and_reserve", fmt.Sprintf(`{"selection_id":"warm-%d","token_ids":%s}`, i, benchPrompt(i)), http.StatusOK)
	}
	return h
}

// benchPrompt is a 512-token prompt: a shared 256-token prefix, then a suffix unique to i.
func benchPrompt(i int) string {
	var sb strings.Builder
	sb.WriteString("[")
	for j := range 512 {
		if j > 0 {
			sb.WriteString(",")
		}
		if j < 256 {
			fmt.Fprint(&sb, j)
		} else {
			fmt.Fprint(&sb, 100000+i*512+j)
		}
	}
	sb.WriteString("]")
	return sb.String()
}

// serve sends one request through h in process and checks the status.
func serve(b *testing.B, h http.Handler, method, path, body string, want int) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}

// discardWriter is a minimal ResponseWriter, so the benchmark measures the handler rather than
// httptest's recorder.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// benchInProcess runs body through the handler b.N times.
func benchInProcess(b *testing.B, path string, body []byte) {
	h := benchHandler(b)
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(body)
	req := httptest.NewRequest("POST", path, rd)
	req.Header.Set("Content-Type", "application/json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w.code = 0
		clear(w.h)
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// BenchmarkSelectInProcess is POST /select with a 512-token prompt through the handler.
func BenchmarkSelectInProcess(b *testing.B) {
	benchInProcess(b, "/select", []byte(`{"token_ids":`+benchPrompt(1000)+`}`))
}

// BenchmarkSelectHashesInProcess is POST /select with precomputed hashes (32 blocks).
func BenchmarkSelectHashesInProcess(b *testing.B) {
	hs := make([]string, 32)
	for i := range hs {
		hs[i] = fmt.Sprint(int64(i)*7919 - 1<<40)
	}
	list := "[" + strings.Join(hs, ",") + "]"
	benchInProcess(b, "/select", []byte(`{"block_hashes":`+list+`,"sequence_hashes":`+list+`,"isl_tokens":512}`))
}

// BenchmarkReserveLifecycleInProcess is one EPP request: select_and_reserve, prefill_complete
// and DELETE, i.e. three handler calls per op.
func BenchmarkReserveLifecycleInProcess(b *testing.B) {
	h := benchHandler(b)
	w := &discardWriter{h: http.Header{}}
	prompt := benchPrompt(2000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("req-%d", i)
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/select_and_reserve", `{"selection_id":"` + id + `","token_ids":` + prompt + `}`},
			{"POST", "/reservations/" + id + "/prefill_complete", ``},
			{"DELETE", "/reservations/" + id, ``},
		} {
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			w.code = 0
			clear(w.h)
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK {
				b.Fatalf("%s %s: %d", c.method, c.path, w.code)
			}
		}
	}
}

// BenchmarkSelectLoopback is POST /select over a real loopback connection with keep-alive.
func BenchmarkSelectLoopback(b *testing.B) {
	srv := httptest.NewServer(benchHandler(b))
	defer srv.Close()
	client := srv.Client()
	body := []byte(`{"token_ids":` + benchPrompt(1000) + `}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := client.Post(srv.URL+"/select", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkSelectInProcessWithMetrics is BenchmarkSelectInProcess with the request metrics on,
// as cmd/kvselect serves it: the difference is the instrumentation's cost per request.
func BenchmarkSelectInProcessWithMetrics(b *testing.B) {
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Clock: newFakeClock().Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Close() })
	h := api.New(svc, api.Options{Metrics: api.NewMetrics(svc)})
	for id := 1; id <= 3; id++ {
		serve(b, h, "POST", "/workers", worker(uint64(id), "", "", 16), http.StatusCreated)
	}
	body := []byte(`{"token_ids":` + benchPrompt(1000) + `}`)
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(body)
	req := httptest.NewRequest("POST", "/select", rd)
	req.Header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}
