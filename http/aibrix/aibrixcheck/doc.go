// Package aibrixcheck is a conformance checker for AIBrix external
// replica-routing decision services (protocol v1alpha1), written from the
// Gateway's side of the exchange.
//
// A [Client] performs exchanges exactly as the Gateway does (headers,
// no compression, no redirects, no retries, one deadline — default 10 ms —
// covering the whole exchange including the body). [ValidateDecision]
// applies the Gateway's response validation in its order (aibrix-protocol-
// spec §5, V1–V8) plus the HTTP-level checks, and [ValidateProblem] checks
// RFC 9457 rejections of invalid requests. Every check is a named [Rule]
// with a description and a [Level].
//
// The typed decode is the Gateway's own (Go encoding/json into pointer
// members, see gateway_decode.go), so the envelope and legality rules judge
// what the Gateway sees: a valid body plus a case-variant twin ("Status",
// metadata.RequestId, "APIVersion") that overrides the canonical member
// fails a Required rule, as it fails at the Gateway. Exact member names and
// the exact media-type string are Recommended rules beside the Gateway's
// lenient readings.
//
// [Suite] holds the standard cases: valid Advisory and Authoritative
// requests (single and multi-port candidates, escaped and maximal request
// ids, policy context, a 128-candidate snapshot, unknown members) and
// invalid ones that must be rejected with Problem Details (schema
// violations, duplicate members, trailing data, wrong media type, wrong
// method, oversized body, missing or wrong bearer token). [Run] produces a
// per-rule [Report]; [Main] is the `kvselect aibrix-check` command.
//
// The rejection cases encode kvselect's reading of the contract (for
// example 413 for bodies over 256 KiB, 415 for other media types, 405 with
// Problem Details for other methods). The Gateway never sends such requests,
// so their rules are Recommended: AIBrix's own samples answer some with 400,
// 501 or an empty 405, or accept them, and still pass the Required rules.
package aibrixcheck
