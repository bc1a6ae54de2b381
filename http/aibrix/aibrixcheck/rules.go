package aibrixcheck

// Level says how a rule failure affects the verdict.
type Level string

const (
	// Required rules mirror what the AIBrix Gateway enforces on the answers
	// to the requests it sends (a failure means the Gateway would treat the
	// answer as an outage), and that a rejection never echoes the bearer
	// token. AIBrix's own sample services pass every Required rule.
	Required Level = "required"
	// Recommended rules check the contract's advice to services (always
	// send port, unique decision ids, the exact media-type string, exact
	// member names) and the answers to requests the Gateway never sends
	// (malformed or oversized bodies, wrong method, media type or token:
	// 413 vs 400, 405 vs 501, Problem Details on every rejection); they are
	// reported but do not fail the run.
	Recommended Level = "recommended"
)

// Rule is one named check.
type Rule struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Level       Level  `json:"level"`
}

// Rule ids. The V-numbers in descriptions refer to the Gateway's response
// validation order (aibrix-protocol-spec §5).
//
// Prefixes group them: exchange.* (transport and deadline), http.* (status
// line and headers), body.*/json.* (V1–V5, the bytes), envelope.* (V6),
// bounds.* (V7), decision.* (V8, legality against mode and snapshot),
// service.* (advice to services, Recommended), problem.* (rejections).
// Ids are stable: tooling may match on them.
const (
	RuleTransport        = "exchange.transport"
	RuleDeadline         = "exchange.deadline"
	RuleBodyLimit        = "http.body-limit"
	RuleStatus200        = "http.status-200"
	RuleMediaTypeGateway = "http.media-type-gateway"
	RuleMediaTypeExact   = "http.media-type-exact"
	RuleIdentityEncoding = "http.identity-encoding"
	RuleNonEmpty         = "body.non-empty"
	RuleJSONSyntax       = "json.syntax"
	RuleNoDuplicates     = "json.no-duplicate-members"
	RuleNoTrailing       = "json.no-trailing-data"
	RuleObject           = "json.object"
	RuleNoNullOptional   = "json.no-null-optional"
	RuleTypes            = "json.types"
	RuleExactNames       = "json.exact-member-names"
	RuleAPIVersion       = "envelope.api-version"
	RuleKind             = "envelope.kind"
	RuleMetadata         = "envelope.metadata"
	RuleRequestIDEcho    = "envelope.request-id-echo"
	RuleStatusPresent    = "envelope.status"
	RuleDecisionIDBound  = "bounds.decision-id"
	RuleReasonBound      = "bounds.reason"
	RuleDecisionKnown    = "decision.known"
	RuleLegalForMode     = "decision.legal-for-mode"
	RuleTargetIffSel     = "decision.target-iff-selected"
	RuleTargetInSnapshot = "decision.target-in-snapshot"
	RulePortAdvertised   = "decision.port-advertised"
	RulePortPresent      = "service.port-present"
	RuleDecisionIDUnique = "service.decision-id-unique"
	RuleProblemStatus    = "problem.status"
	RuleProblemMedia     = "problem.media-type"
	RuleProblemBody      = "problem.body"
	RuleProblemChallenge = "problem.www-authenticate"
	RuleProblemNoSecret  = "problem.no-token-echo"
)

// Rules is the catalogue in report order, which follows the order in which
// the Gateway applies its checks. Treat it as read-only.
var Rules = []Rule{
	{RuleTransport, "The exchange completes without a transport error (connect, write, read).", Required},
	{RuleDeadline, "The whole exchange, body included, finishes within the Gateway deadline (default 10ms).", Required},
	{RuleBodyLimit, "The response body is at most 64 KiB (checked before the status, like the Gateway).", Required},
	{RuleStatus200, "A decision is answered with HTTP 200 exactly (no redirects, no 201/204).", Required},
	{RuleMediaTypeGateway, "Content-Type parses (mime) to application/vnd.aibrix.external-routing+json with version=v1alpha1.", Required},
	{RuleMediaTypeExact, "Content-Type is exactly application/vnd.aibrix.external-routing+json;version=v1alpha1 (the Gateway also accepts spaces, a quoted version and extra parameters such as charset).", Recommended},
	{RuleIdentityEncoding, "The response is not compressed (no Content-Encoding other than identity).", Required},
	{RuleNonEmpty, "V1: the response body is not empty.", Required},
	{RuleJSONSyntax, "V2: the body is well-formed JSON (UTF-8, no BOM).", Required},
	{RuleNoDuplicates, "V2: no object at any depth repeats a member name.", Required},
	{RuleNoTrailing, "V2: exactly one JSON value; only whitespace may follow it.", Required},
	{RuleObject, "V3: the top-level value is a JSON object.", Required},
	{RuleNoNullOptional, "V3: decisionId, target, reason and port are omitted rather than null.", Required},
	{RuleTypes, "V4: the body decodes as the Gateway decodes it (encoding/json: schema types, integer port literal).", Required},
	{RuleExactNames, "Envelope members use their exact names: the Gateway's encoding/json also binds case variants (\"Status\", \"RequestId\"), and a later twin overrides the canonical member.", Recommended},
	{RuleAPIVersion, "V6: apiVersion is routing.aibrix.ai/v1alpha1.", Required},
	{RuleKind, "V6: kind is ReplicaSelectionResponse.", Required},
	{RuleMetadata, "V6: metadata is present.", Required},
	{RuleRequestIDEcho, "V6: metadata.requestId equals the sent requestId byte for byte.", Required},
	{RuleStatusPresent, "V6: status and status.decision are present.", Required},
	{RuleDecisionIDBound, "V7: metadata.decisionId, if present, is at most 256 bytes of valid UTF-8.", Required},
	{RuleReasonBound, "V7: status.reason, if present, is at most 256 bytes of valid UTF-8.", Required},
	{RuleDecisionKnown, "V8: status.decision is Selected, NoDecision or Denied (exact case).", Required},
	{RuleLegalForMode, "V8: the decision is legal for the mode (Advisory: Selected/NoDecision; Authoritative: Selected/Denied).", Required},
	{RuleTargetIffSel, "V8: status.target is present for Selected and absent otherwise.", Required},
	{RuleTargetInSnapshot, "V8: target.id is exactly one of the sent candidate ids.", Required},
	{RulePortAdvertised, "V8: target.port is one of the candidate's ports (omitted only for single-port candidates).", Required},
	{RulePortPresent, "Selected targets always carry port (contract advice to services).", Recommended},
	{RuleDecisionIDUnique, "decisionId values never repeat across decisions.", Recommended},
	{RuleProblemStatus, "Invalid requests are rejected with the expected 4xx status (the Gateway never sends them).", Recommended},
	{RuleProblemMedia, "Rejections use application/problem+json.", Recommended},
	{RuleProblemBody, "Problem bodies are one JSON object with string title and integer status equal to the HTTP status.", Recommended},
	{RuleProblemChallenge, "401 responses carry a Bearer WWW-Authenticate challenge.", Recommended},
	{RuleProblemNoSecret, "Problem bodies never echo the bearer token.", Required},
}
