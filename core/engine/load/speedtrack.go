package load

import "github.com/kvselect/kvselect/kvwire"

// Learning each owner's prefill speed from the lifecycle the tracker already sees.
//
// A rank's prefill_complete time minus its booking time is the request's time to first token on
// that rank: queueing behind other prefills plus its own service. The tracker separates the two
// with a busy-period rule: each owner keeps a mark, the instant since which its prefill work
// has not been accounted for — set when the owner's pending prefills go from none to one (the
// booking's AdmittedAt: the rank starts working then), and moved to every prefill completion.
// A completion at time c then yields the sample (tokens of the completed booking, c − mark) and
// moves the mark to c.
//
//   - A FIFO worker that prefills one request at a time (the legacy simulator): the interval is
//     exactly the completed request's service time, since it started when the previous one
//     completed, or at its booking when the rank was idle.
//   - A batching worker (vLLM, SGLang: several prefills share each step, chunked under a token
//     budget) completes prefills out of order and concurrently: single samples then mix the
//     work of their neighbours, but the intervals of one busy stretch tile it exactly, so the
//     least-squares fit of interval on tokens recovers the rank's throughput; the Huber weights
//     keep the odd long interval from dominating.
//   - Time that a prefill spends waiting behind others is never counted twice: it belongs to
//     the interval of the request that was being served.
//   - A batching worker also completes several prefills in one step: the first carries the
//     step's whole interval, the others almost none. Such completions are merged into one
//     sample — a completion whose interval is under half its expected time at the current
//     estimate joins the sample before it — so that the robust weights see one batch of the
//     right size, not one huge and several empty intervals (which they would clip unevenly,
//     biasing the estimate fast). A sample is therefore learned one completion late.
//
// A completion without a time (PrefillComplete) or of a booking with no tracked prefill tokens
// gives no sample; an untimed completion also drops the mark, so that no later interval spans
// unaccounted work, until the owner goes idle and a new stretch starts.
//
// Peers' bookings and completions, mirrored into the tracker, take part like local ones (their
// times are the arrival times of the replicated events, a few milliseconds late): a rank's busy
// stretch is the same whichever replica booked its requests.

// speedState is the per-owner part of ownerState that learns the speed.
type speedState struct {
	est    speedEstimator
	mark   int64 // unix nanos; valid when marked
	marked bool
	// held is the sample not yet learned (see above): its features (speedEstimator) and
	// interval.
	heldX1, heldX2, heldMS float64
}

// complete takes one timed completion of tokens uncached tokens after ctx cached ones that
// occupied the rank for ms, merging it into the held sample when it is part of the same batch.
// When it is not, the held sample is learned and returned (ok true) for the partition's
// context estimator (speed_context.go).
func (sp *speedState) complete(tokens, ctx uint64, ms float64) (x1, x2, held float64, ok bool) {
	if !sp.est.prior.Valid() {
		return 0, 0, 0, false
	}
	n1, n2 := features(sp.est.prior, float64(tokens), float64(ctx))
	if sp.heldX1 > 0 && ms < 0.5*sp.est.predictMS(n1, n2) {
		sp.heldX1 += n1
		sp.heldX2 += n2
		sp.heldMS += ms
		return 0, 0, 0, false
	}
	x1, x2, held, ok = sp.heldX1, sp.heldX2, sp.heldMS, sp.heldX1 > 0
	if ok {
		sp.est.observeWork(x1, x2, held)
	}
	sp.heldX1, sp.heldX2, sp.heldMS = n1, n2, ms
	return x1, x2, held, ok
}

// SetSpeedPrior sets o's prior speed model (it is used until samples arrive and regularises the
// fit afterwards) and keeps the samples learned so far. An invalid model or unknown owner is
// ignored.
func (t *Tracker) SetSpeedPrior(o kvwire.Owner, m SpeedModel) {
	slot, ok := t.slots[o]
	if !ok || !m.Valid() {
		return
	}
	t.owners[slot].speed.est.setPrior(m)
	t.publishSpeed(slot)
}

// Speed returns o's learned speed; an unknown owner has the zero estimate.
func (t *Tracker) Speed(o kvwire.Owner) SpeedEstimate {
	slot, ok := t.slots[o]
	if !ok {
		return SpeedEstimate{}
	}
	return t.owners[slot].speed.est.estimate()
}

// SpeedAt returns the published speed model of the owner at ordinal i: its estimate once it
// has TrustedSamples samples, zero before and out of range. Cost O(1),
// one read from a dense per-ordinal array (the selection loop calls it for every rank).
func (t *Tracker) SpeedAt(i int) SpeedModel {
	if uint(i) >= uint(len(t.order)) {
		return SpeedModel{}
	}
	return t.speeds[i]
}

// PrefillCompleteAt is PrefillComplete at time now (unix nanos, the caller's clock, comparable
// with AdmittedAt): the first completion of a booking with tracked prefill tokens also gives its
// owner's speed estimator one sample (see the top of this file). ErrNotFound when id is not
// live.
func (t *Tracker) PrefillCompleteAt(id string, now int64) error {
	bi, err := t.lookup(id)
	if err != nil {
		return err
	}
	r := &t.books[bi]
	st := &t.owners[r.slot]
	if r.prefill > 0 {
		if overtaken, ok := st.order.complete(r.admitted, now); ok {
			t.reorder.observe(overtaken)
		}
	}
	if r.prefill > 0 && st.speed.marked {
		if now >= st.speed.mark {
			if x1, x2, ms, ok := st.speed.complete(r.prefill, r.ctx, float64(now-st.speed.mark)/1e6); ok {
				t.learned(r.slot, x1, x2, ms)
			}
		}
		st.speed.mark = max(st.speed.mark, now)
	}
	t.dropPrefill(st, r.prefill, r.ctx)
	r.prefill = 0
	return nil
}

// startStretch is called by Add before a booking's prefill is counted: an idle owner starts a
// busy stretch at the booking's admission time.
func (st *ownerState) startStretch(prefill uint64, at int64) {
	if prefill > 0 && st.pending == 0 {
		st.speed.mark, st.speed.marked = at, true
	}
}

// learned publishes slot's new estimate after it learned the sample (x1, x2, ms), which also
// teaches the partition's context share; when that share changes, every owner is re-fitted at
// the new one and republished (O(owners); the share is quantised, so this is rare).
func (t *Tracker) learned(slot uint32, x1, x2, ms float64) {
	changed := t.ctx.observe(x1, x2, ms)
	t.publishSpeed(slot)
	if changed {
		t.refitShare()
	}
}

// TrustedSamples is how many samples a rank's estimate needs before the tracker publishes it
// (SpeedAt, RankLoad.Speed, SpeedSum) and counts it towards the central speed; until then the
// rank's published speed is the zero model, "unknown".
//
// What the tracker publishes is what the cost prices against (the engine's consensusPrice: the
// mean of the published speeds). Every rank used to publish from the start — its prior until
// its first sample — so the first ranks to learn were averaged with ranks still at the prior.
// One sample can move an estimate far from the prior: on a batching engine a sample is a merged
// batch (above), the interval of a step that completed a hundred short prefills against
// features that price each at the prior's fixed overhead, and the regularisation (priorMass
// pseudo-samples of priorMS) weighs little beside it. On a fleet serving one 32K-token system
// prompt (8B vLLM-style preset, 17.5× its rate) the first sample put a rank 7× below the prior,
// the mean of it and seven prior ranks lay within the band of neither, and that rank was priced
// 7× cheaper than its neighbours: it took about 200 requests in a second and kept them for the
// rest of the run (p99 TTFT 2.2× least-loaded's, load CV 0.10; with unknown ranks left out of
// the mean and priced at it, 1.2× and 0.03: integration/sim TestFirstSampleDoesNotDrawTheFleet).
// Sixteen rather than one (warmSamples are taken at full weight): no single merged batch
// defines a rank or the consensus. The two measured alike on five matrices (README, "Speeds
// priced once trusted").
const TrustedSamples = 2 * warmSamples

// published is the model the tracker publishes for the owner: its estimate once it is
// trusted (TrustedSamples), the zero model ("unknown") before.
func (sp *speedState) published() SpeedModel {
	if sp.est.samples < TrustedSamples {
		return SpeedModel{}
	}
	return sp.est.cur
}
