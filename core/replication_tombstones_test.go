package core

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
)

// TestTombstonesAgainstModel drives the ring with random adds and checks every query against a
// naive model: the last cap distinct ids added, each with its latest free time.
func TestTombstonesAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		capacity := 1 + rng.IntN(8)
		tb := newTombstones(capacity)
		var order []string // distinct ids, oldest first (model)
		at := map[string]int64{}
		for step := range 200 {
			id := fmt.Sprint("id", rng.IntN(12))
			now := time.Unix(0, int64(step))
			tb.add(id, now)
			if _, ok := at[id]; !ok {
				order = append(order, id)
				if len(order) > capacity {
					delete(at, order[0])
					order = order[1:]
				}
			}
			at[id] = int64(step)
			cutoff := time.Unix(0, int64(rng.IntN(step+1)))
			for q := range 12 {
				qid := fmt.Sprint("id", q)
				want := false
				if v, ok := at[qid]; ok && v >= cutoff.UnixNano() {
					want = true
				}
				if got := tb.freed(qid, cutoff); got != want {
					t.Fatalf("seed %d step %d: freed(%s, %d) = %v, want %v", seed, step, qid, cutoff.UnixNano(), got, want)
				}
			}
			if tb.len() != len(at) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, tb.len(), len(at))
			}
		}
	}
}

// TestResyncDoesNotResurrectFrees: B frees A's booking during an outage (the free never
// reaches A); A's republish after the reconnect must not bring the booking back on B.
func TestResyncDoesNotResurrectFrees(t *testing.T) {
	srv := natstest.RunServer(t)
	port := serverPort(t, srv)
	a := startReplica(t, srv.ClientURL(), "a", "b")
	b := startReplica(t, srv.ClientURL(), "b", "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	book(t, a, "x", 1)
	waitSameLoads(t, a, b)

	natstest.Shutdown(srv)
	natstest.WaitFor(t, syncTimeout, func() error {
		if b.nc.IsConnected() {
			return fmt.Errorf("b still connected")
		}
		return nil
	})
	if err := b.svc.Free("x"); err != nil {
		t.Fatal(err)
	}
	opts := natstest.DefaultOptions()
	opts.Port = port
	natstest.RunServerWithOptions(t, opts)
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := b.br.ResyncStats(); st.StaleAdds == 0 {
			return fmt.Errorf("B has not received A's republish of x yet: %+v", st)
		}
		return nil
	})
	if n := activeRequests(b.svc); n != 0 {
		t.Fatalf("B mirrors %d bookings after A's republish; x was freed on B", n)
	}
	// A never heard the free: it keeps x until its expiry guard (documented divergence).
	if n := activeRequests(a.svc); n != 1 {
		t.Fatalf("A has %d bookings, want x", n)
	}
}
