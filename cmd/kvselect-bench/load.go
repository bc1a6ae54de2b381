package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/integration/sim"
)

// selectBodies pre-encodes one /select_and_reserve body per trace request (hash path).
func selectBodies(reqs []sim.Request) [][]byte {
	out := make([][]byte, 0, len(reqs))
	for _, r := range reqs {
		hs := make([]int64, len(r.Blocks))
		for i, b := range r.Blocks {
			hs[i] = int64(b)
		}
		b, _ := json.Marshal(map[string]any{"block_hashes": hs, "sequence_hashes": hs, "isl_tokens": r.Input})
		out = append(out, b)
	}
	return out
}

// phase is one measured run.
type phase struct {
	callsPerSec, loopsPerSec float64
	p50, p99, p999           float64
	errors                   int
}

// drive runs K closed-loop clients for warmup+duration. With lifecycle, each loop iteration is
// select_and_reserve → prefill_complete → DELETE (three calls); otherwise one call.
func drive(base string, bodies [][]byte, k int, warmup, duration time.Duration, lifecycle bool) phase {
	tr := &http.Transport{MaxIdleConns: k, MaxIdleConnsPerHost: k, MaxConnsPerHost: k, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var measuring atomic.Bool
	var calls, loops, errs atomic.Int64
	lat := make([][]float64, k)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := c * 7919
			for {
				select {
				case <-stop:
					return
				default:
				}
				body := bodies[i%len(bodies)]
				i++
				t := time.Now()
				resp, err := client.Post(base+"/select_and_reserve", "application/json", bytes.NewReader(body))
				if err != nil {
					errs.Add(1)
					continue
				}
				var sel struct {
					SelectionID string `json:"selection_id"`
				}
				ok := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&sel) == nil
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(t)
				n := int64(1)
				if ok && lifecycle {
					n += call(client, http.MethodPost, base+"/reservations/"+sel.SelectionID+"/prefill_complete", &errs)
					n += call(client, http.MethodDelete, base+"/reservations/"+sel.SelectionID, &errs)
				}
				if !ok {
					errs.Add(1)
				}
				if measuring.Load() {
					calls.Add(n)
					loops.Add(1)
					lat[c] = append(lat[c], float64(d)/float64(time.Millisecond))
				}
			}
		}()
	}
	time.Sleep(warmup)
	errs.Store(0)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed := time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	return phase{
		callsPerSec: float64(calls.Load()) / elapsed, loopsPerSec: float64(loops.Load()) / elapsed,
		p50: pct(0.50), p99: pct(0.99), p999: pct(0.999), errors: int(errs.Load()),
	}
}

// call makes one lifecycle call and returns 1 (a call was made).
func call(c *http.Client, method, url string, errs *atomic.Int64) int64 {
	req, _ := http.NewRequest(method, url, http.NoBody)
	resp, err := c.Do(req)
	if err != nil {
		errs.Add(1)
		return 1
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		errs.Add(1)
	}
	return 1
}

func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeSmall(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = io.WriteString(w, body)
}
