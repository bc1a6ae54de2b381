package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

// TestQueueStress drives the router queue from many goroutines at once — waiting selections
// and bookings across two policy classes, pinned requests, callers that give up at random
// moments, prefill completions and frees, with no periodic recheck running (every dispatch must
// come from an event) — and then checks that nothing was lost: every caller
// got exactly one answer, the queue is empty, and the only live bookings are the ones callers
// hold (a dispatched booking whose caller gave up was freed, none was booked twice). Run with
// -race it is also the queue's data-race test.
func TestQueueStress(t *testing.T) {
	svc := policyFixture(t, `
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}, {min_tokens: 24, bucket: l}]
policy_classes:
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 16, queue_policy: wspt, prefill_busy_threshold: 40}
  - {name: fl, policy_family: f, cache_bucket: l, quantum: 64, prefill_busy_threshold_frac: 0.4}
`)
	if _, err := svc.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(2)), Endpoint: ptr("http://w2"), BlockSize: ptr(uint32(4)),
		MaxNumBatchedTokens: ptr(uint64(100))}); err != nil {
		t.Fatal(err)
	}
	const callers, perCaller = 12, 80
	var (
		mu      sync.Mutex
		held    = map[string]bool{} // bookings callers were given and the "engine" has not freed
		answers int
		engines sync.WaitGroup // the simulated engines' timers
	)
	// The simulated engines: a booking's prefill completes after up to 2 ms and the request
	// ends up to 3 ms later, independently of the caller (which never holds anything while it
	// waits, so the test cannot deadlock by its own making).
	run := func(id string, rng *rand.Rand) {
		engines.Add(1)
		prefill := time.Duration(rng.IntN(2000)) * time.Microsecond
		rest := time.Duration(rng.IntN(3000)) * time.Microsecond
		time.AfterFunc(prefill, func() {
			if err := svc.PrefillComplete(id); err != nil {
				t.Errorf("prefill_complete %s: %v", id, err)
			}
			time.AfterFunc(rest, func() {
				defer engines.Done()
				if err := svc.Free(id); err != nil {
					t.Errorf("free %s: %v", id, err)
				}
				mu.Lock()
				delete(held, id)
				mu.Unlock()
			})
		})
	}
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			for i := range perCaller {
				id := fmt.Sprintf("c%d-%d", c, i)
				req := selReq(id, 10_000*c+100*i, 4*(1+rng.IntN(12)))
				if rng.IntN(8) == 0 {
					req.PinnedWorker = &engine.PinnedWorker{WorkerID: ptr(uint64(1 + rng.IntN(2))), DPRank: ptr(uint32(0))}
				}
				ctx, cancel := context.WithCancel(t.Context())
				if rng.IntN(4) == 0 { // this caller gives up after a random short while
					time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
				}
				reserve := rng.IntN(5) != 0
				var resp *SelectResponse
				var err error
				if reserve {
					resp, err = svc.SelectAndReserveWait(ctx, req)
				} else {
					resp, err = svc.SelectWait(ctx, req)
				}
				cancel()
				mu.Lock()
				answers++
				if err == nil && reserve {
					held[*resp.SelectionID] = true
				}
				mu.Unlock()
				switch {
				case err == nil && reserve:
					run(*resp.SelectionID, rng)
				case err == nil, errors.Is(err, context.Canceled):
				default:
					t.Errorf("%s: unexpected error %v", id, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers still waiting after 60 s: a parked request was never dispatched")
	}
	engines.Wait()
	if answers != callers*perCaller || len(held) != 0 {
		t.Fatalf("%d answers (want %d), %d bookings still held", answers, callers*perCaller, len(held))
	}
	// Every booking was freed by its caller or, for callers that gave up after dispatch, by
	// the service: nothing is left on either worker.
	poll.True(t, poll.Generous, "no live bookings", func() bool { return activeRequests(svc) == 0 })
	if st := svc.Stats().Queue; st.Pending != 0 || waiting(svc) != 0 {
		t.Fatalf("queue not empty: %+v", st)
	}
	svc.mu.Lock()
	parked := svc.eng.ParkedIDs()
	svc.mu.Unlock()
	if parked != 0 {
		t.Fatalf("%d parked ids left behind", parked)
	}
	t.Logf("queue stats: %+v", svc.Stats().Queue)
}
