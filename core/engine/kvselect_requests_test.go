package engine

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
)

// TestRequestsMS: the live-request term is active_request_tokens × the priced B per live
// booking (plus decode_active_request_weight), and costOf adds exactly that (every other term
// held fixed).
func TestRequestsMS(t *testing.T) {
	prior := PrefillModel{A: 0, B: 0.5, C: 0}
	k := kvselectTerms{w: weights{prior: prior, missWork: 4, fixedSpeed: true, robust: true, reqTokens: 256}, bs: 4, isl: 32, islBlocks: 8}
	k.observeRank(load.SpeedModel{}, 0)
	sp := load.SpeedModel{B: 0.5}
	if got, want := k.requestsMS(sp, 3), 256*0.5*3.0; got != want {
		t.Errorf("requestsMS(3) = %v, want %v", got, want)
	}
	none := k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	three := k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 0, 3, 0, 0, 0, 0)
	if got, want := three-none, 256*0.5*3.0; got != want {
		t.Errorf("costOf with 3 live bookings − with none = %v ms, want %v", got, want)
	}
	k.w.reqWeight = 2 // Dynamo's fixed decode_active_request_weight adds to the same count
	if got, want := k.requestsMS(sp, 3), (2+256*0.5)*3.0; got != want {
		t.Errorf("requestsMS(3) with decode_active_request_weight 2 = %v, want %v", got, want)
	}
	k.w.reqTokens, k.w.reqWeight = 0, 0
	if d := k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 0, 3, 0, 0, 0, 0) - k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 0, 0, 0, 0, 0, 0); d != 0 {
		t.Errorf("active_request_tokens 0: live bookings cost %v ms, want 0", d)
	}
}

// TestLiveRequestsSpreadOffABusyRank: rank 1 runs eight short requests (prefill complete, so
// no queued prefill), rank 2 none; the pressure and decode terms are off, so nothing else tells
// the ranks apart. With active_request_tokens 0 the costs tie and the engine draws between the
// ranks; at the default every new request goes to the idle rank.
func TestLiveRequestsSpreadOffABusyRank(t *testing.T) {
	for _, tokens := range []float64{0, KVSelectDefaults().ActiveRequestTokens} {
		cfg := KVSelectDefaults()
		cfg.KVPressureWeight, cfg.DecodeContextWeight, cfg.ActiveRequestTokens = 0, 0, tokens
		e := twoRankFleet(t, &cfg, func(*WorkerSpec) {})
		for i := range 8 {
			runningOn(t, e, fmt.Sprintf("running-%d", i), 1, toks(90_000+100*i, 16))
		}
		onBusy := selectionsOn(t, e, 1, 40)
		if tokens > 0 && onBusy != 0 {
			t.Errorf("active_request_tokens %v: %d of 40 on the busy rank, want 0", tokens, onBusy)
		} else if tokens == 0 && (onBusy == 0 || onBusy == 40) {
			t.Errorf("active_request_tokens 0: %d of 40 on the busy rank, want a draw between tied ranks", onBusy)
		}
	}
}
