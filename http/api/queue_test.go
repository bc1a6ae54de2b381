package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

// TestRouterQueueOverHTTP: with router_queue_threshold set, a select_and_reserve that finds
// every rank busy waits (the HTTP call blocks) and is answered 200 once a prefill completes; a
// client that hangs up while waiting leaves the queue and books nothing.
func TestRouterQueueOverHTTP(t *testing.T) {
	h := newHarnessWith(t, setup{edit: func(c *engine.Config) { q := 0.5; c.QueueThreshold = &q }})
	h.addWorker(worker(1, "", "", 4, `"max_num_batched_tokens":100`))
	h.must(http.StatusOK, "POST", "/select_and_reserve", `{"selection_id":"big","token_ids":`+tokens(0, 60)+`}`)

	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	post := func(ctx context.Context, body string, out chan<- answer) {
		req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/select_and_reserve", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			out <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		out <- answer{status: resp.StatusCode, body: m}
	}
	pending := func(n int) func() bool {
		return func() bool { return h.svc.Stats().Queue.Pending == n }
	}

	// A caller that hangs up while parked.
	gone, hangUp := context.WithCancel(t.Context())
	goneOut := make(chan answer, 1)
	go post(gone, `{"selection_id":"gone","token_ids":`+tokens(1000, 1008)+`}`, goneOut)
	poll.True(t, poll.Generous, "first caller parked", pending(1))
	hangUp()
	if a := <-goneOut; a.err == nil {
		t.Fatalf("the hung-up call returned %d", a.status)
	}
	poll.True(t, poll.Generous, "abandoned request left the queue", func() bool {
		st := h.svc.Stats().Queue
		return st.Pending == 0 && st.Abandoned == 1
	})

	// A caller that waits is answered once big's prefill completes.
	out := make(chan answer, 1)
	go post(t.Context(), `{"selection_id":"waiter","token_ids":`+tokens(2000, 2008)+`}`, out)
	poll.True(t, poll.Generous, "second caller parked", pending(1))
	select {
	case a := <-out:
		t.Fatalf("answered while every rank is busy: %+v", a)
	default:
	}
	h.must(http.StatusOK, "POST", "/reservations/big/prefill_complete", "")
	select {
	case a := <-out:
		if a.err != nil || a.status != http.StatusOK || a.body["selection_id"] != "waiter" {
			t.Fatalf("waiter answered %+v", a)
		}
	case <-time.After(poll.Generous):
		t.Fatal("the parked request was not answered after the prefill completed")
	}
	// The abandoned request booked nothing; the waiter's booking is live.
	h.wantError(h.do("DELETE", "/reservations/gone", ""), http.StatusNotFound, "gone")
	h.must(http.StatusOK, "DELETE", "/reservations/waiter", "")
}
