package engine

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestProbeQueueServiceMS: the probe's service estimate is the prefill time of the request's
// uncached tokens on the rank where that time is least, in the rank's speed model (the prior
// until it learns), and it is zero-free and monotone in the uncached work.
func TestProbeQueueServiceMS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueThreshold = ptr(0.5)
	e := newEngine(t, &cfg)
	for id := uint64(1); id <= 3; id++ {
		mustUpsert(t, e, spec(id, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(100)) }))
	}
	store(t, e, kvwire.Owner{Worker: 2}, toks(0, 16)) // 4 blocks
	prior := PrefillModel{A: cfg.PrefillModelA, B: cfg.PrefillModelB, C: cfg.PrefillModelC}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*max(1, want) }

	pr, err := e.ProbeQueue(selReq("", toks(0, 22)))
	noErr(t, err)
	if want := prior.MS(22 - 16); !near(pr.ServiceMS, want) {
		t.Fatalf("service %v ms, want %v (6 uncached tokens on worker 2)", pr.ServiceMS, want)
	}
	only := selReq("", toks(0, 22))
	only.AllowedWorkerIDs = []uint64{1, 3}
	pr1, err := e.ProbeQueue(only)
	noErr(t, err)
	if want := prior.MS(22); !near(pr1.ServiceMS, want) || !(pr1.ServiceMS > pr.ServiceMS) {
		t.Fatalf("service without worker 2 %v ms, want %v", pr1.ServiceMS, want)
	}
	long, err := e.ProbeQueue(selReq("", toks(1000, 400)))
	noErr(t, err)
	if !(long.ServiceMS > pr1.ServiceMS) {
		t.Fatalf("400 uncached tokens estimated %v ms, not above 22's %v", long.ServiceMS, pr1.ServiceMS)
	}

	// A pinned request is estimated on its rank alone.
	pin := selReq("", toks(0, 22))
	pin.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
	pp, err := e.ProbeQueue(pin)
	noErr(t, err)
	if want := prior.MS(22); !near(pp.ServiceMS, want) {
		t.Fatalf("pinned to worker 1: service %v ms, want %v", pp.ServiceMS, want)
	}
}

func TestServiceMSFallsBackToPrior(t *testing.T) {
	prior := PrefillModel{B: 0.01, C: 5}
	learned := PrefillModel{B: 0.1}
	if got := serviceMS(learned, prior, false, 100); got != 10 {
		t.Fatalf("learned model: %v ms, want 10", got)
	}
	if got := serviceMS(learned, prior, true, 100); got != 6 {
		t.Fatalf("fixed speed: %v ms, want the prior's 6", got)
	}
	if got := serviceMS(PrefillModel{}, prior, false, 100); got != 6 {
		t.Fatalf("unusable learned model: %v ms, want the prior's 6", got)
	}
	if got := serviceMS(PrefillModel{}, PrefillModel{B: math.NaN()}, false, 100); got != 0 {
		t.Fatalf("unusable prior: %v ms, want 0", got)
	}
}
