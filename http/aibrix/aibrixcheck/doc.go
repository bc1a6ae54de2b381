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
// Member names are matched exactly (case-sensitive); the Gateway's
// encoding/json decode also accepts differently-cased names, so this checker
// is deliberately stricter there, as it is on the exact media-type string
// (reported as its own rule next to the Gateway's lenient parse).
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
// example 413 for bodies over 256 KiB, 415 for other media types); a
// service the Gateway accepts may still answer those with another 4xx.
package aibrixcheck
