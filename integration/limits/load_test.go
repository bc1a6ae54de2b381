package limits

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// registerWorkers registers n single-rank workers (block size 16) in the default partition.
func registerWorkers(t *testing.T, s *server, n int, edit func(map[string]any)) {
	t.Helper()
	for i := 1; i <= n; i++ {
		w := map[string]any{
			"worker_id": i, "endpoint": fmt.Sprintf("http://w%d:8000", i),
			"kv_events_endpoint": fmt.Sprintf("tcp://127.0.0.1:%d", 1+i), "block_size": 16,
		}
		if edit != nil {
			edit(w)
		}
		code, body, err := s.call("POST", "/workers", w)
		if err != nil || code/100 != 2 {
			t.Fatalf("register worker %d: %d %s %v", i, code, body, err)
		}
	}
}

// hashBody is a select_and_reserve body with n explicit block and sequence hashes, seeded.
func hashBody(id string, n, seed int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"selection_id":%q,`, id)
	b.Write(hashTail(n, seed))
	return b.Bytes()
}

// hashTail is hashBody without its opening brace and selection id, so a load generator can
// build it once and send it behind many ids (its own CPU then stays out of the measurement).
func hashTail(n, seed int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `"isl_tokens":%d,"block_hashes":[`, n*16)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, seed*1_000_003+i)
	}
	b.WriteString(`],"sequence_hashes":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, seed*7_000_001+i)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// post sends a raw JSON body.
func post(c *http.Client, url string, body []byte) (int, []byte, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// postParts sends head+tail as one JSON body without copying tail.
func postParts(c *http.Client, url string, head, tail []byte) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, io.MultiReader(bytes.NewReader(head), bytes.NewReader(tail)))
	if err != nil {
		return 0, nil, err
	}
	req.ContentLength = int64(len(head) + len(tail))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// latencies summarises selection latencies.
type latencies struct {
	n        int
	p50, p99 time.Duration
	failed   int
}

// selectLoop runs small /select requests from one keep-alive client for d and returns the
// latency distribution.
func selectLoop(s *server, d time.Duration) latencies {
	c := &http.Client{}
	var lat []time.Duration
	failed := 0
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		body := fmt.Appendf(nil, `{"token_ids":[%d,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]}`, i%97)
		st := time.Now()
		code, _, err := post(c, s.url+"/select", body)
		lat = append(lat, time.Since(st))
		if err != nil || code != http.StatusOK {
			failed++
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return latencies{}
	}
	return latencies{n: len(lat), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], failed: failed}
}

// hugeBookingLoop runs k clients that book n-hash requests and free them until stop closes.
// It returns how many bookings succeeded and how many were refused (by a limit).
func hugeBookingLoop(t *testing.T, s *server, k, n int, stop <-chan struct{}) func() (ok, refused int64) {
	var okN, refN atomic.Int64
	var wg sync.WaitGroup
	for c := range k {
		wg.Add(1)
		tails := make([][]byte, 16) // distinct prompts, built before the clock starts
		for i := range tails {
			tails[i] = hashTail(n, c*1000+i)
		}
		go func() {
			defer wg.Done()
			cl := &http.Client{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("huge-%d-%d", c, i)
				code, body, err := postParts(cl, s.url+"/select_and_reserve", fmt.Appendf(nil, `{"selection_id":%q,`, id), tails[i%len(tails)])
				if err != nil {
					continue
				}
				if code != http.StatusOK {
					refN.Add(1)
					if i == 0 {
						t.Logf("huge booking refused: %d %.200s", code, body)
					}
					continue
				}
				okN.Add(1)
				req, _ := http.NewRequest("DELETE", s.url+"/reservations/"+id, nil)
				if resp, err := cl.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	return func() (int64, int64) { wg.Wait(); return okN.Load(), refN.Load() }
}

// selectUnderHugeBookings measures /select latency alone and then with k clients looping
// n-hash bookings.
func selectUnderHugeBookings(t *testing.T, s *server, k, n int, d time.Duration) (alone, loaded latencies, ok, refused int64) {
	alone = selectLoop(s, d)
	stop := make(chan struct{})
	wait := hugeBookingLoop(t, s, k, n, stop)
	loaded = selectLoop(s, d)
	close(stop)
	ok, refused = wait()
	return
}

var _ = json.Marshal
