package core

import (
	"strings"
	"testing"
)

// TestListenerPerEndpoint: a second rank announcing an endpoint that already feeds another
// rank gets no second socket (a failed listener naming the owner); once the first owner is
// deleted and the second re-registers, it gets the listener. The total cap refuses listeners
// past --max-kv-listeners the same way.
func TestListenerPerEndpoint(t *testing.T) {
	svc := ingestLive(t)
	shared := "tcp://127.0.0.1:41900"
	if _, err := svc.UpsertWorker(ingestSpec(1, "m", 1, shared)); err != nil {
		t.Fatal(err)
	}
	rec, err := svc.UpsertWorker(ingestSpec(2, "m", 1, shared))
	if err != nil {
		t.Fatal(err)
	}
	if ls := rec.Listeners["0"]; ls.Status != "failed" || !strings.Contains(ls.LastError, "already feeds worker 1 dp_rank 0") {
		t.Fatalf("second rank on a shared endpoint: %+v", ls)
	}
	if l := ingestListeners(svc); l[own(1, 0)] == nil || l[own(2, 0)] != nil {
		t.Fatalf("listeners %v: want only worker 1's socket", l)
	}
	if _, err := svc.DeleteWorker(1); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.UpsertWorker(ingestSpec(2, "m", 1, "tcp://127.0.0.1:41901")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.UpsertWorker(ingestSpec(2, "m", 1, shared)); err != nil {
		t.Fatal(err)
	}
	if l := ingestListeners(svc); l[own(2, 0)] == nil {
		t.Fatal("endpoint not freed by deleting its owner")
	}

	capped, err := New(Config{Engine: ingestService(t).cfg.Engine, Seed: 3, MaxKVListeners: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = capped.Close() })
	capped.Start()
	capped.EnableKVEvents()
	capped.OpenGate()
	rec, err = capped.UpsertWorker(ingestSpec(3, "m", 3))
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, ls := range rec.Listeners {
		if ls.Status == "failed" && strings.Contains(ls.LastError, "the limit is 2 (--max-kv-listeners)") {
			failed++
		}
	}
	if failed != 1 || len(ingestListeners(capped)) != 3 {
		t.Fatalf("3 ranks under a cap of 2: %d refused (want 1): %+v", failed, rec.Listeners)
	}
}
