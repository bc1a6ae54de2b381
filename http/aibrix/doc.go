// Package aibrix implements the AIBrix external replica-routing decision
// service, protocol routing.aibrix.ai/v1alpha1: an AIBrix Gateway configured
// with AIBRIX_EXTERNAL_ROUTER_ENDPOINT posts a ReplicaSelectionRequest (a
// snapshot of candidate Pods, ports, allow-listed attributes and cached
// metrics) and kvselect answers with exactly one decision.
//
// # Layers
//
// The package keeps the decision pure and the HTTP thin:
//
//   - [DecodeRequest] parses and validates a body (no I/O, never panics);
//   - [Evaluate] turns a validated [Request], a [Policy], the kvselect
//     [Backend] and an optional session [Binding] into a [Decision];
//   - [AppendResponse] / [AppendProblem] encode answers;
//   - [Handler] wires them to net/http with authentication ([authtoken.Set]),
//     sessions ([SessionStore]), decision ids ([NewDecisionID]) and an
//     injectable clock and entropy source.
//
// This package does not import kvselect's core: http/aibrix/aibrixcore, the
// one adapter, implements [Backend] (active load per registered worker) and
// [SessionStore] on core's replicated session table.
//
// # Request validation
//
// Every schema rule of the contract is enforced and answered with RFC 9457
// Problem Details (application/problem+json): apiVersion/kind constants;
// metadata.requestId 1..256 UTF-8 bytes and equal to the single X-Request-Id
// header; non-empty spec.model; policyMode Advisory|Authoritative; a
// non-empty candidates array with unique ids of the form namespace/pod-name
// (≤256 bytes); non-empty, unique ports in 1..65535; attributes objects of at
// most 32 members named ^[A-Za-z][A-Za-z0-9_./-]{0,127}$ with string values
// of at most 256 characters; runningRequests an integer ≥ 0; ratios in [0,1].
// The body must be one JSON value with no duplicate members (at any depth)
// and no trailing data, at most 256 KiB (413 beyond). Optional members must
// be omitted, not null. Unknown members are ignored. Wrong method → 405,
// missing/wrong bearer token → 401, wrong media type or a compressed body →
// 415.
//
// # Decisions
//
// Advisory requests are answered Selected or NoDecision; Authoritative ones
// Selected or Denied — never anything else. A Selected target always
// carries port. Every decision carries a fresh random UUIDv4 decisionId, so
// ids are unique across replicas without coordination. The request id is
// echoed exactly.
//
// # Policy
//
// A [Policy] (YAML or JSON, see testdata/policy.example.yaml) has deny rules,
// hard requirements, weighted soft preferences, an optional session key and
// load weights. Rules may be scoped to models and to trusted policyContext
// attribute values. Evaluation order: deny rules (first match refuses),
// requirements (filter), session stickiness, then least cost.
//
// # Scoring
//
// For an eligible candidate c with n = len(c.ports) ports, let the Backend
// report ranks (when c is a registered worker of the request's model) and
//
//	R = max(c.metrics.runningRequests, Σ ranks.ActiveRequests)
//	P = Σ ranks.ActivePrefillTokens
//	D = Σ ranks.ActiveDecodeBlocks
//	load(c) = (W.requests·R + W.prefillTokens·P + W.decodeBlocks·D) / n
//	        + W.kvCacheUsage·kvCacheUsage + W.engineUtilization·engineUtilization
//	cost(c) = load(c) − Σ weight of in-scope preferences c matches
//
// Absent metrics and unregistered workers contribute 0. R takes the maximum,
// not the sum, because the Gateway's pod-wide count and kvselect's own
// accounting observe the same requests. Dividing by n treats each port as
// one unit of serving capacity (AIBrix derives one port per data-parallel
// rank). Default weights are in [DefaultLoadWeights]; preference weights are
// in the same "running requests" unit, so a weight of 2 trades against two
// queued requests and a weight of 1000 makes a preference effectively
// lexicographic.
//
// The candidate of lowest cost wins; equal costs go to the smallest candidate
// id in byte order, so the answer never depends on the wire order.
//
// # Ports and data-parallel ranks
//
// When the Backend reports exactly as many ranks as the candidate advertises
// ports (at least two), in strictly ascending rank order, the i-th smallest
// port serves the i-th smallest rank, and the answer is the port of the rank
// with the lowest W.requests·ActiveRequests + W.prefillTokens·prefill +
// W.decodeBlocks·decode (ties → lower rank). Otherwise the answer is the
// smallest advertised port.
//
// # Sessions
//
// When Policy.SessionKey names a policyContext attribute present in a
// request, the (model, value) pair is a session. A session whose bound
// candidate is still present and eligible is answered with that candidate
// (and its bound port while still advertised), reason SessionAffinity; every
// Selected answer (re)binds the session for Policy.SessionTTL.
package aibrix
