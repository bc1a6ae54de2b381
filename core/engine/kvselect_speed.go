package engine

import "github.com/kvselect/kvselect/core/engine/load"

// Speed pricing of the kvselect policy (kvselect_cost.go): which prefill-time model a rank's
// queue and this request's prefill are priced with.
//
// Each rank learns its own model online (speed.go, load/speed.go): the prior scaled by a speed
// factor. Two things make the learned factor differ from the prior, and they call for
// different treatment:
//
//   - What every rank shares: the prior is a guess (the default is the Dynamo mocker's
//     polynomial, not the deployed GPU and model), and a vLLM- or SGLang-style worker's
//     prefill shares each step with its running decodes, so under load every rank's
//     prefill is slower than a lone prefill. In simulation the 8B preset's ranks learn
//     1.9–3.0× the prior on an agentic workload.
//   - What tells ranks apart: a genuinely different worker (another GPU, a shared GPU, a larger
//     model, a rank serving far more decode) — or noise: a rank whose cache churns learns a
//     per-token cost up to ~30 % above the truth (its booked uncached tokens undercount what
//     it really recomputes), and pricing that as slowness sends its traffic elsewhere, which
//     churns those caches in turn (a feedback loop that turned an overloaded agentic workload
//     on the legacy model from bad to collapsed).
//
// With RobustKVSelect the reference is the partition's consensus — the mean per-token cost of its
// ranks' learned models, B̄, over the ranks whose estimate is trusted (load.TrustedSamples samples)
// — not the prior: a rank whose learned B lies within a factor of consensusBand of B̄ is priced as
// the prior scaled to B̄ (every rank alike: the shared slowdown is priced, the noise is not acted
// on), a rank outside it at its own learned model, a rank not trusted yet at B̄. Against the prior
// (the earlier rule) the band was discontinuous exactly where it mattered: with the fleet's factors
// straddling the band's edge (1.93–2.99 against a band of 2), some ranks were priced at the prior
// and the others at 2–3× it — an artificial 2–3× imbalance that drove the agentic workload's tail
// to 7–10× the best baseline's. With learning off (FixedPrefillModel) or no rank's speed trusted
// yet, every rank is priced at the prior. RobustKVSelect is the default; without it
// kvselectTerms.price applies the earlier prior-relative band (kvselect_cost.go).

// consensusBand is the factor, around the partition's consensus, within which a rank's learned
// speed is not acted on (see above). It must exceed what identical ranks learn apart from their
// loads alone, because acting on that feeds back: a batching engine's per-token cost falls as
// its batches grow, so a rank priced faster gets more traffic and measures faster still (and a
// slower one the reverse). At 1.25 (the earlier value) it did not: on the SGLang-style 8B
// preset serving one 32K-token system prompt (tight caches, round-robin p99 + 5 s), identical
// ranks learned 0.039–0.060 ms per token, the fastest left the band and drew the traffic, and
// the mean was 3.0× llm-d's (1.4× at 1.5). It stays below what tells a different worker from
// the rest — a GPU of another generation, a worker sharing its GPU, an A100 beside H100s (about
// 3× slower prefill, integration/fleet) — which is priced at its own speed. 1.5 and 2 gave the
// same decisions on four matrices but for one or two cells each (README, "Speeds priced once
// trusted"); the smaller keeps more of a genuine difference.
const consensusBand = 1.5

// consensusPrice is price with RobustKVSelect (see the top of this file), with learning on. The
// consensus B̄ = sumB/nB over the ranks whose speed is known (trusted: load.TrustedSamples), its
// band edge and the prior scaled to it are computed once per selection (settle,
// kvselect_partition.go); when no rank's speed is known (nB = 0) or the prior has no per-token
// cost there is no consensus (agreed false) and every rank is priced at the prior. A rank whose
// own speed is not known yet is priced at the consensus: what the partition's ranks agree on is
// the best guess for one more of them, and a rank that is genuinely different is priced as such
// once it has shown it.
func (k *kvselectTerms) consensusPrice(sp load.SpeedModel) load.SpeedModel {
	if !k.agreed {
		return k.w.prior
	}
	if !(sp.B > 0) || (sp.B < k.consensusHi && float64(sp.B*consensusBand) > k.consensus.B) {
		return k.consensus
	}
	return sp
}
