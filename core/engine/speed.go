package engine

import (
	"time"

	"github.com/kvselect/kvselect/core/engine/load"
)

// Learned worker speed.
//
// kvselect's cost (kvselect_cost.go) prices queued and own prefill work in milliseconds of each
// rank's time, so it needs each rank's prefill speed. Nothing about a worker's hardware or
// model is assumed: every rank starts from a prior (Config.PrefillModelA..C, or
// Config.WorkerPrefillModels for one worker) and then learns its own model online from the
// lifecycle the service already receives — booking time, prefill_complete time and the
// booking's uncached tokens — with the busy-stretch rule of load/speedtrack.go, which separates
// a prefill's service time from its queueing, and the robust estimator of load/speed.go.
//
// Replication: the learned model itself is not replicated, and no message layout changes.
// Every replica already mirrors its peers' bookings and prefill completions (lifecycle v1), so
// each one sees every rank's whole busy stretch and learns from all of it — peers' completions
// are timed at their arrival, a few milliseconds after the peer saw them, which is noise the
// estimator absorbs. Replicating estimates would add a message, a merge rule for disagreeing
// estimates and a trust problem (a peer's wrong clock would poison every replica), for no
// information the replicas do not already have; a restarted replica re-learns within a few
// dozen prefills per rank and uses the prior meanwhile.

// PrefillModel is a prefill-time model: ms(t) = A·t² + B·t + C for t uncached tokens.
type PrefillModel = load.SpeedModel

// PrefillSpeed is a rank's learned speed as GET /loads reports it.
type PrefillSpeed struct {
	// MSPerToken is B, MSPerTokenSquared A, OverheadMS C and MSPerTokenContextToken K of the
	// rank's model (load.SpeedModel: K·t·c for t uncached tokens after c cached ones).
	MSPerToken             float64 `json:"ms_per_token"`
	MSPerTokenSquared      float64 `json:"ms_per_token_squared"`
	OverheadMS             float64 `json:"overhead_ms"`
	MSPerTokenContextToken float64 `json:"ms_per_token_context_token"`
	// Samples counts the prefill completions learned from; Confidence is the effective
	// (decayed, outlier-weighted) sample mass relative to the estimator's memory, in [0, 1].
	Samples    uint64  `json:"samples"`
	Confidence float64 `json:"confidence"`
}

// speedMemory is the estimator's effective memory in samples (1/(1 − forget) in load/speed.go).
const speedMemory = 256

func prefillSpeedOf(est load.SpeedEstimate) PrefillSpeed {
	return PrefillSpeed{
		MSPerToken: est.Model.B, MSPerTokenSquared: est.Model.A, OverheadMS: est.Model.C, MSPerTokenContextToken: est.Model.K,
		Samples: est.Samples, Confidence: min(1, est.Weight/speedMemory),
	}
}

// priorSpeed is the prior model of worker id's ranks.
func (c *Config) priorSpeed(id uint64) PrefillModel {
	if m, ok := c.WorkerPrefillModels[id]; ok {
		return m
	}
	return c.defaultSpeed()
}

// defaultSpeed is the configured prior model (PrefillModelA..K).
func (c *Config) defaultSpeed() PrefillModel {
	return PrefillModel{A: c.PrefillModelA, B: c.PrefillModelB, C: c.PrefillModelC, K: c.PrefillModelK}
}

// seedSpeed makes worker id's prior the one its ranks get when the tracker first adds them.
func (e *Engine) seedSpeed(p *partition, id uint64) {
	p.tracker.SetDefaultSpeed(e.cfg.priorSpeed(id))
}

// PrefillCompleteAt is PrefillComplete at time now: the completion also teaches the booking's
// rank its prefill speed (see the top of this file).
func (e *Engine) PrefillCompleteAt(id string, now time.Time) error {
	return e.prefillComplete(id, now.UnixNano(), true)
}

// prefillSpeeds returns every rank's learned speed, in (worker, rank) order.
func (p *partition) prefillSpeeds() []PrefillSpeed {
	out := make([]PrefillSpeed, 0, len(p.cands))
	for i := range p.tracker.Owners() {
		if o, ok := p.tracker.OwnerAt(i); ok {
			out = append(out, prefillSpeedOf(p.tracker.Speed(o)))
		}
	}
	return out
}
