package core

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvlisten"
	"github.com/kvselect/kvselect/internal/poll"
)

// Tests of listener reconciliation inside the service: which (worker, rank) keeps its
// *kvlisten.Listener across catalog changes, and that a PATCH racing with live batch
// application is safe (run with -race).
//
// Listener identity is observed by pointer: kvIngest.subs maps each owner to the rankListener
// that wraps the *kvlisten.Listener, and a kept rank must keep the very same pointer (its
// watermark lives inside it). The rules under test are spec §3.5: a rank whose KV-event
// endpoint and the worker's replay endpoint are unchanged keeps its listener; a changed,
// added or removed rank gets a fresh listener or none; an incomplete worker runs none.
// These tests read kvIngest.subs under kvIngest.mu, as the service itself does.

// ingestLive returns a service with KV events on and the gate open: every schedulable rank gets
// a real listener.
func ingestLive(t testing.TB) *Service {
	t.Helper()
	svc := ingestService(t)
	svc.Start()
	svc.EnableKVEvents()
	svc.OpenGate()
	return svc
}

// ingestListeners returns the running listener of every owner (nil for a rank whose
// listener failed to start). It holds kvIngest.mu only while copying.
func ingestListeners(svc *Service) map[Owner]*kvlisten.Listener {
	svc.kv.mu.Lock()
	defer svc.kv.mu.Unlock()
	out := map[Owner]*kvlisten.Listener{}
	for w, ranks := range svc.kv.subs {
		for r, rl := range ranks {
			out[Owner{Worker: w, Rank: r}] = rl.l
		}
	}
	return out
}

// TestReconcileListenerIdentity applies catalog changes in order to one service and checks,
// after each, which owners run a listener and which kept the previous step's listener. The
// endpoints are never served: reconciliation does not depend on connectivity.
func TestReconcileListenerIdentity(t *testing.T) {
	svc := ingestLive(t)
	ep := func(port int) string { return "tcp://127.0.0.1:" + strconv.Itoa(port) }
	str := func(s string) *string { return &s }
	u32 := func(v uint32) *uint32 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	steps := []struct {
		name   string
		do     func() error
		owners []Owner // owners with a listener afterwards
		kept   []Owner // of those, the ones whose listener is the previous step's
	}{
		{"register two ranks", func() error {
			_, err := svc.UpsertWorker(ingestSpec(1, "m", 2, ep(41000), ep(41001)))
			return err
		}, []Owner{own(1, 0), own(1, 1)}, nil},
		{"patch unrelated fields", func() error {
			_, err := svc.PatchWorker(1, WorkerPatch{TotalKVBlocks: u64(100), Taints: []string{"spot"}})
			return err
		}, []Owner{own(1, 0), own(1, 1)}, []Owner{own(1, 0), own(1, 1)}},
		{"upsert the same spec", func() error {
			_, err := svc.UpsertWorker(ingestSpec(1, "m", 2, ep(41000), ep(41001)))
			return err
		}, []Owner{own(1, 0), own(1, 1)}, []Owner{own(1, 0), own(1, 1)}},
		{"change rank 1's endpoint", func() error {
			_, err := svc.PatchWorker(1, WorkerPatch{KVEventsEndpoints: map[string]string{"0": ep(41000), "1": ep(41011)}})
			return err
		}, []Owner{own(1, 0), own(1, 1)}, []Owner{own(1, 0)}},
		{"grow to three ranks", func() error {
			_, err := svc.PatchWorker(1, WorkerPatch{DataParallelSize: u32(3), KVEventsEndpoints: map[string]string{"0": ep(41000), "1": ep(41011), "2": ep(41002)}})
			return err
		}, []Owner{own(1, 0), own(1, 1), own(1, 2)}, []Owner{own(1, 0), own(1, 1)}},
		{"shrink to one rank", func() error {
			_, err := svc.PatchWorker(1, WorkerPatch{DataParallelSize: u32(1)})
			return err
		}, []Owner{own(1, 0)}, []Owner{own(1, 0)}},
		{"add a replay endpoint", func() error {
			_, err := svc.PatchWorker(1, WorkerPatch{ReplayEndpoint: str(ep(41100))})
			return err
		}, []Owner{own(1, 0)}, nil},
		{"second worker", func() error {
			_, err := svc.UpsertWorker(ingestSpec(2, "m", 1, ep(42000)))
			return err
		}, []Owner{own(1, 0), own(2, 0)}, []Owner{own(1, 0)}},
		{"invalid endpoint makes worker 2 incomplete", func() error {
			_, err := svc.PatchWorker(2, WorkerPatch{KVEventsEndpoints: map[string]string{"0": "tcp://127.0.0.1:x"}})
			return err
		}, []Owner{own(1, 0)}, []Owner{own(1, 0)}},
		{"heal worker 2", func() error {
			_, err := svc.PatchWorker(2, WorkerPatch{KVEventsEndpoints: map[string]string{"0": ep(42000)}})
			return err
		}, []Owner{own(1, 0), own(2, 0)}, []Owner{own(1, 0)}},
		{"delete worker 1", func() error {
			_, err := svc.DeleteWorker(1)
			return err
		}, []Owner{own(2, 0)}, []Owner{own(2, 0)}},
	}
	// Each step is checked against the listeners left by the previous one, so the table reads
	// as a history: "kept" lists the owners whose listener pointer must not change.
	prev := ingestListeners(svc)
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		cur := ingestListeners(svc)
		if len(cur) != len(st.owners) {
			t.Fatalf("%s: listeners for %v, want %v", st.name, keys(cur), st.owners)
		}
		kept := map[Owner]bool{}
		for _, o := range st.kept {
			kept[o] = true
		}
		for _, o := range st.owners {
			l := cur[o]
			if l == nil {
				t.Fatalf("%s: no listener for %v", st.name, o)
			}
			if same := prev[o] == l; same != kept[o] {
				t.Fatalf("%s: listener of %v kept=%t, want %t", st.name, o, same, kept[o])
			}
		}
		// A replaced or removed listener is closed.
		for o, l := range prev {
			if cur[o] != l && l.State().Status != kvlisten.StatusClosed {
				t.Fatalf("%s: replaced listener of %v is %v, want closed", st.name, o, l.State().Status)
			}
		}
		prev = cur
	}
}

// keys lists the owners of a listener map (for failure messages).
func keys(m map[Owner]*kvlisten.Listener) []Owner {
	out := make([]Owner, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	return out
}

// TestReconcileWhileApplying PATCHes a worker with unchanged endpoints again and again while
// a Go PUB streams batches into its listener. Every batch must be applied exactly once by the
// one listener that exists throughout (its watermark reaches the last seq and never restarts),
// and -race must find no unsynchronised access between reconciliation and the handler.
func TestReconcileWhileApplying(t *testing.T) {
	svc := ingestLive(t)
	pub := zmq4.NewPub(context.Background())
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ep := "tcp://" + pub.Addr().String()
	ingestRegister(t, svc, ingestSpec(1, "m", 1, ep))
	first := ingestListeners(svc)[own(1, 0)]
	// seq is owned by whichever goroutine is publishing: the warm-up loop first, then the
	// streaming goroutine alone (wg orders the two), so it needs no lock.
	var seq uint64
	send := func(payload []byte) {
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], seq)
		seq++
		if err := pub.Send(zmq4.NewMsgFrom([]byte("kv"), s[:], payload)); err != nil {
			t.Error(err)
		}
	}
	// applied reads the watermark of the first listener: if reconciliation replaced it, this
	// listener would be closed and its watermark would stop short of the last batch.
	applied := func() (uint64, bool) {
		st := first.State()
		return st.Watermark, st.HasWatermark
	}
	// Warm up past the slow joiner: publish empty batches until one is applied.
	warmErr := poll.Poll(poll.Generous, 5*time.Millisecond, func() error {
		if _, ok := applied(); ok {
			return nil
		}
		send(ingestBatch(0))
		return errors.New("listener never applied a batch")
	})
	if warmErr != nil {
		t.Fatal(warmErr)
	}
	base, warm := svc.Stats().KVBatches, first.State() // warm-up may have lost batches

	// Stream while PATCHing: every PATCH runs reconcile under kvIngest.mu while the handler
	// goroutine applies batches under Service.mu, which is the interleaving -race checks.
	const batches = 400
	start := seq
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range batches {
			send(ingestBatch(0, ingestStored(i, 0, 2)))
		}
	}()
	for i := range 200 {
		total := uint64(1000 + i)
		if _, err := svc.PatchWorker(1, WorkerPatch{TotalKVBlocks: &total}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// Every streamed batch must be applied: the watermark reaches the last seq without a gap
	// or restart beyond what the warm-up already saw.
	last := start + batches - 1
	err := poll.Poll(poll.Generous, time.Millisecond, func() error {
		if w, _ := applied(); w < last {
			return fmt.Errorf("watermark %d, want %d", w, last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if l := ingestListeners(svc)[own(1, 0)]; l != first {
		t.Fatal("PATCH with unchanged endpoints replaced the listener")
	}
	st := first.State()
	if st.Restarts != warm.Restarts || st.Lost != warm.Lost || st.Gaps != warm.Gaps {
		t.Fatalf("listener state %+v after warm-up %+v: a kept listener must see one contiguous stream", st, warm)
	}
	if got := svc.Stats().KVBatches - base; got < batches {
		t.Fatalf("applied %d batches after warm-up, want at least %d", got, batches)
	}
}

// TestReconcileListenerStartFailure covers an endpoint the engine's ZMQ check accepts but the
// listener refuses (an invalid IPv6 literal): the rank must show a failed listener with the
// reason in the worker's record and in the status counts, rather than silently run nothing;
// fixing the endpoint starts a real listener.
func TestReconcileListenerStartFailure(t *testing.T) {
	svc := ingestLive(t)
	// The engine's ValidateZMQEndpoint accepts any bracketed host; kvlisten parses the literal.
	bad := "tcp://[zz]:5557"
	rec, err := svc.UpsertWorker(ingestSpec(1, "m", 1, bad))
	if err != nil {
		t.Fatal(err)
	}
	ls, ok := rec.Listeners["0"]
	if !ok || ls.Status != "failed" || ls.Endpoint != bad || !strings.Contains(ls.LastError, "invalid IPv6 host") {
		t.Fatalf("record %+v: want rank 0 failed with the listener's reason", rec)
	}
	if c := svc.Stats().ListenersByStatus; c["failed"] != 1 || len(c) != 1 {
		t.Fatalf("status counts %v, want one failed", c)
	}
	// Healing: a changed endpoint replaces the failed rank by a real listener (nobody serves
	// the port, so it may be pending or failed to dial, but never with the IPv6 error).
	good := "tcp://127.0.0.1:43000"
	rec, err = svc.PatchWorker(1, WorkerPatch{KVEventsEndpoints: map[string]string{"0": good}})
	if err != nil {
		t.Fatal(err)
	}
	if ls := rec.Listeners["0"]; ls.Endpoint != good || ls.Status == "failed" && strings.Contains(ls.LastError, "IPv6") {
		t.Fatalf("after fixing the endpoint: %+v", ls)
	}
	if l := ingestListeners(svc)[own(1, 0)]; l == nil {
		t.Fatal("no listener started for the fixed endpoint")
	}
	if _, err := svc.DeleteWorker(1); err != nil {
		t.Fatal(err)
	}
	if c := svc.Stats().ListenersByStatus; len(c) != 0 {
		t.Fatalf("status counts after delete %v, want none", c)
	}
}
