package aibrix

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchRequest builds a Gateway-shaped request with n two-port candidates,
// attributes and all three metrics.
func benchRequest(n int) *Request {
	req := &Request{RequestID: "5b0f7c1e-3d7a-4a63-9a61-0d4b1c2e9f10", Model: "qwen2-7b", PolicyMode: Advisory,
		PolicyContext: Attributes{{"sessionId", "s-1"}, {"tenantTier", "gold"}}}
	for i := 0; i < n; i++ {
		req.Candidates = append(req.Candidates, Candidate{
			ID: fmt.Sprintf("ml/qwen2-7b-%04d", i), Ports: []int{8000, 8001},
			Attributes: Attributes{{"routing.example.com/accelerator-class", []string{"h100", "a100"}[i%2]},
				{"topology.kubernetes.io/zone", fmt.Sprintf("z%d", i%3)}},
			Metrics: Metrics{RunningRequests: int64(i % 7), HasRunningRequests: true, KVCacheUsage: float64(i%10) / 10,
				HasKVCacheUsage: true, EngineUtilization: 0.5, HasEngineUtilization: true},
		})
	}
	return req
}

// benchBackend reports two ranks for every candidate.
type benchBackend struct{}

func (benchBackend) CandidateLoad(_, id string) ([]RankLoad, bool) {
	return []RankLoad{{Rank: 0, ActiveRequests: len(id) % 3, ActivePrefillTokens: 512}, {Rank: 1, ActiveDecodeBlocks: 64}}, true
}

const benchPolicy = `
requirements:
- {context: {tenantTier: premium}, attribute: routing.example.com/accelerator-class, values: [h100]}
preferences:
- {attribute: topology.kubernetes.io/zone, values: [z1], weight: 2}
`

// BenchmarkDecodeEvaluate measures the pure path: decode + policy + choice.
func BenchmarkDecodeEvaluate(b *testing.B) {
	pol := mustPolicy(b, benchPolicy)
	for _, n := range []int{8, 32, 128} {
		body := AppendRequest(nil, benchRequest(n))
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req, err := DecodeRequest(body)
				if err != nil {
					b.Fatal(err)
				}
				if d := Evaluate(req, pol, benchBackend{}, nil); d.Decision != Selected {
					b.Fatal(d)
				}
			}
		})
	}
}

// BenchmarkHandlerLoopback measures decision latency through the real
// handler on a loopback httptest server with concurrent keep-alive clients
// (one per CPU, so latency measures the service rather than client-side
// queueing; raise -cpu for more), reporting p50/p99 per exchange and the
// process CPU per exchange (client and server together).
func BenchmarkHandlerLoopback(b *testing.B) {
	pol := mustPolicy(b, benchPolicy+"sessionKey: sessionId\n")
	for _, n := range []int{8, 32, 128} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			h, err := NewHandler(Config{Policy: pol}, benchBackend{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			body := AppendRequest(nil, benchRequest(n))
			url := srv.URL + DefaultPath
			var mu sync.Mutex
			var all []time.Duration
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				lat := make([]time.Duration, 0, 1024)
				buf := make([]byte, 0, 1024)
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					req.Header["Content-Type"] = []string{MediaType}
					req.Header["X-Request-Id"] = []string{"5b0f7c1e-3d7a-4a63-9a61-0d4b1c2e9f10"}
					start := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					buf = buf[:0]
					for {
						if len(buf) == cap(buf) {
							buf = append(buf, 0)[:len(buf)]
						}
						m, err := resp.Body.Read(buf[len(buf):cap(buf)])
						buf = buf[:len(buf)+m]
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
					resp.Body.Close()
					lat = append(lat, time.Since(start))
					if resp.StatusCode != 200 {
						b.Errorf("status %d: %s", resp.StatusCode, buf)
						return
					}
				}
				mu.Lock()
				all = append(all, lat...)
				mu.Unlock()
			})
			b.StopTimer()
			// Process CPU (client and server share the process) per exchange
			// is far less sensitive to other load on the machine than
			// wall-clock percentiles.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}

// BenchmarkDecodeOnly isolates DecodeRequest (strict parse + validation).
func BenchmarkDecodeOnly(b *testing.B) {
	body := AppendRequest(nil, benchRequest(128))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU returns the user+system CPU time consumed by this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
