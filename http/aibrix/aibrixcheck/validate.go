package aibrixcheck

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kvselect/kvselect/http/aibrix"
)

// Result is the outcome of one rule on one exchange. Detail is empty for
// passes and explains the violation (with the offending value) for
// failures; it never contains the bearer token because no rule quotes
// request headers.
type Result struct {
	Rule   string `json:"rule"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Exchange is what came back from one HTTP exchange, as the Gateway sees it.
//
// Invariants set by [Client.Do]: when Err is nil, Status and Header are set
// and Body holds at most aibrix.MaxResponseBytes+1 bytes (Truncated tells
// whether the limit was exceeded, mirroring the Gateway's "read limit+1,
// then compare"). When Err is non-nil the other response fields are zero.
// Elapsed covers the whole exchange including the body read.
type Exchange struct {
	Status    int
	Header    http.Header
	Body      []byte // at most aibrix.MaxResponseBytes+1 bytes
	Truncated bool   // the body exceeded aibrix.MaxResponseBytes
	Elapsed   time.Duration
	Deadline  time.Duration
	Err       error // transport failure; nil on success
	TimedOut  bool  // Err was caused by the deadline
}

// Decision is a response body that passed the typed decode (V4). Has*
// flags distinguish omitted members from empty ones.
type Decision struct {
	RequestID     string
	DecisionID    string
	HasDecisionID bool
	Decision      string
	HasTarget     bool
	TargetID      string
	Port          int64
	HasPort       bool
	Reason        string
	HasReason     bool
}

// recorder accumulates results in rule order. It is used by one goroutine
// for one exchange.
type recorder struct{ out []Result }

// check records a rule outcome and returns ok.
func (r *recorder) check(rule string, ok bool, format string, args ...any) bool {
	res := Result{Rule: rule, OK: ok}
	if !ok {
		res.Detail = fmt.Sprintf(format, args...)
	}
	r.out = append(r.out, res)
	return ok
}

// checkTransport records exchange.transport and exchange.deadline and
// reports whether a response is available to inspect.
func checkTransport(r *recorder, ex *Exchange) bool {
	if ex.Err != nil {
		if ex.TimedOut {
			r.check(RuleDeadline, false, "no complete answer within %v: %v", ex.Deadline, ex.Err)
			return false
		}
		r.check(RuleTransport, false, "%v", ex.Err)
		return false
	}
	r.check(RuleTransport, true, "")
	r.check(RuleDeadline, ex.Deadline <= 0 || ex.Elapsed <= ex.Deadline, "took %v, deadline %v", ex.Elapsed, ex.Deadline)
	return true
}

// ValidateDecision applies every decision rule to ex, the answer to sent.
// Rules run in the Gateway's order; once a rule that the later ones depend
// on fails, the dependent rules are not reported. The returned Decision is
// non-nil when the body decoded (V4 passed).
func ValidateDecision(ex *Exchange, sent *aibrix.Request) ([]Result, *Decision) {
	r := &recorder{}
	d := validateDecision(r, ex, sent)
	return r.out, d
}

// validateDecision is ValidateDecision's body. Each early return marks a
// gate: a rule whose failure makes the later rules meaningless (there is no
// JSON to inspect after a syntax error, no envelope without an object, and
// so on). Rules that do not gate (exact media type, identity encoding,
// bounds) are recorded and evaluation continues, so one run reports every
// independent problem at once.
func validateDecision(r *recorder, ex *Exchange, sent *aibrix.Request) *Decision {
	if !checkTransport(r, ex) {
		return nil
	}
	if !r.check(RuleBodyLimit, !ex.Truncated, "response body exceeds %d bytes", aibrix.MaxResponseBytes) {
		return nil
	}
	if !r.check(RuleStatus200, ex.Status == http.StatusOK, "status %d", ex.Status) {
		return nil
	}
	ct := ex.Header.Get("Content-Type")
	if !r.check(RuleMediaTypeGateway, gatewayMediaTypeOK(ct), "Content-Type %q", ct) {
		return nil
	}
	r.check(RuleMediaTypeExact, ct == aibrix.MediaType, "Content-Type %q", ct)
	enc := ex.Header.Get("Content-Encoding")
	r.check(RuleIdentityEncoding, enc == "" || strings.EqualFold(enc, "identity"), "Content-Encoding %q", enc)
	if !r.check(RuleNonEmpty, len(ex.Body) > 0, "empty body") {
		return nil
	}
	root, err := parseJSON(ex.Body)
	if !checkSyntax(r, err) {
		return nil
	}
	if !r.check(RuleObject, root.isKind('{'), "top-level value is %s", root.kindName()) {
		return nil
	}
	if null := nullOptional(root); !r.check(RuleNoNullOptional, null == "", "%s is null; optional members must be omitted", null) {
		return nil
	}
	g, d, typeErr := gatewayDecode(ex.Body)
	if !r.check(RuleTypes, typeErr == nil, "%v", typeErr) {
		return nil
	}
	variant := caseVariantMember(root)
	r.check(RuleExactNames, variant == "", "case-variant member %s", variant)
	if !checkEnvelope(r, g, d, sent) {
		return d
	}
	r.check(RuleDecisionIDBound, !d.HasDecisionID || boundedUTF8(d.DecisionID), "decisionId is %d bytes or not UTF-8", len(d.DecisionID))
	r.check(RuleReasonBound, !d.HasReason || boundedUTF8(d.Reason), "reason is %d bytes or not UTF-8", len(d.Reason))
	checkLegality(r, d, sent)
	return d
}

// gatewayMediaTypeOK mirrors the Gateway: mime.ParseMediaType, lower-cased
// type equal, version parameter exactly v1alpha1, other parameters ignored.
func gatewayMediaTypeOK(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/vnd.aibrix.external-routing+json" && params["version"] == "v1alpha1"
}

// checkSyntax records the three V2 rules from one parse error. A parse
// stops at the first problem, so exactly one of the three fails; the others
// are not recorded as passed because they were not fully checked.
func checkSyntax(r *recorder, err error) bool {
	if err == nil {
		r.check(RuleJSONSyntax, true, "")
		r.check(RuleNoDuplicates, true, "")
		r.check(RuleNoTrailing, true, "")
		return true
	}
	switch {
	case errors.Is(err, errDuplicateMember):
		r.check(RuleNoDuplicates, false, "%v", err)
	case errors.Is(err, errTrailingData):
		r.check(RuleNoTrailing, false, "%v", err)
	default:
		r.check(RuleJSONSyntax, false, "%v", err)
	}
	return false
}

// nullOptional implements V3 on exact member names: it returns the path of
// an optional member encoded as null, or "".
func nullOptional(root *jvalue) string {
	isNull := func(v *jvalue, name string) bool {
		m, ok := v.get(name)
		return ok && m.isKind('n')
	}
	if md, ok := root.get("metadata"); ok && isNull(md, "decisionId") {
		return "metadata.decisionId"
	}
	st, ok := root.get("status")
	if !ok {
		return ""
	}
	switch {
	case isNull(st, "reason"):
		return "status.reason"
	case isNull(st, "target"):
		return "status.target"
	}
	if tg, ok := st.get("target"); ok && isNull(tg, "port") {
		return "status.target.port"
	}
	return ""
}

// checkEnvelope records the V6 rules on the Gateway's view g; false when any
// failed. All five are recorded before returning so a body that is wrong in
// several ways shows every envelope problem. The request id is compared after
// JSON unescaping, byte for byte, which is what "echo exactly" means on the
// wire: "\u0061" and "a" are the same id.
func checkEnvelope(r *recorder, g *gwResponse, d *Decision, sent *aibrix.Request) bool {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	hasMD := g.Metadata != nil
	hasID := hasMD && g.Metadata.RequestID != nil
	hasStatus := g.Status != nil
	hasDecision := hasStatus && g.Status.Decision != nil
	api, kind := deref(g.APIVersion), deref(g.Kind)
	ok := r.check(RuleAPIVersion, g.APIVersion != nil && api == aibrix.APIVersion, "apiVersion %q", api)
	ok = r.check(RuleKind, g.Kind != nil && kind == aibrix.KindResponse, "kind %q", kind) && ok
	ok = r.check(RuleMetadata, hasMD, "metadata missing") && ok
	ok = r.check(RuleRequestIDEcho, hasID && d.RequestID == sent.RequestID,
		"requestId %q (present=%v), sent %q", d.RequestID, hasID, sent.RequestID) && ok
	ok = r.check(RuleStatusPresent, hasStatus && hasDecision, "status present=%v, decision present=%v", hasStatus, hasDecision) && ok
	return ok
}

func boundedUTF8(s string) bool { return len(s) <= aibrix.MaxIDBytes && utf8.ValidString(s) }

// checkLegality records the V8 rules. The snapshot is the exact request
// that was sent: a target must name one of its candidate ids verbatim
// (namespace included) and a port that candidate advertised; an omitted
// port is legal only for single-port candidates (the Gateway then uses that
// port), but services are advised to always send it (RulePortPresent).
func checkLegality(r *recorder, d *Decision, sent *aibrix.Request) {
	dt := aibrix.DecisionType(d.Decision)
	if !r.check(RuleDecisionKnown, dt == aibrix.Selected || dt == aibrix.NoDecision || dt == aibrix.Denied,
		"unknown decision %q", d.Decision) {
		return
	}
	r.check(RuleLegalForMode, dt.Legal(sent.PolicyMode), "%s is illegal in %s mode", dt, sent.PolicyMode)
	if !r.check(RuleTargetIffSel, d.HasTarget == (dt == aibrix.Selected), "decision %s with target present=%v", dt, d.HasTarget) {
		return
	}
	if dt != aibrix.Selected {
		return
	}
	i := slices.IndexFunc(sent.Candidates, func(c aibrix.Candidate) bool { return c.ID == d.TargetID })
	if !r.check(RuleTargetInSnapshot, d.TargetID != "" && i >= 0, "target id %q is not a sent candidate", d.TargetID) {
		return
	}
	ports := sent.Candidates[i].Ports
	if d.HasPort {
		r.check(RulePortAdvertised, slices.Contains(ports, int(d.Port)) && d.Port == int64(int(d.Port)),
			"port %d is not one of %v", d.Port, ports)
	} else {
		r.check(RulePortAdvertised, len(ports) == 1, "port omitted but the candidate advertised %v", ports)
	}
	r.check(RulePortPresent, d.HasPort, "target.port omitted")
}

// ValidateProblem checks an answer that should reject a request with
// wantStatus. token, when non-empty, must not appear in the body.
func ValidateProblem(ex *Exchange, wantStatus int, token string) []Result {
	r := &recorder{}
	// The Gateway never sends an invalid request, so how a service fails to answer one (a
	// reset while an oversized body is still being written, a slow rejection) is not an
	// outage: it is reported under the Recommended problem.status rule, not exchange.*.
	if ex.Err != nil {
		r.check(RuleProblemStatus, false, "no answer (want %d): %v", wantStatus, ex.Err)
		return r.out
	}
	if !r.check(RuleProblemStatus, ex.Status == wantStatus, "status %d, want %d", ex.Status, wantStatus) {
		return r.out
	}
	ct := ex.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	r.check(RuleProblemMedia, err == nil && mt == aibrix.ProblemMediaType, "Content-Type %q", ct)
	r.check(RuleProblemBody, problemBodyOK(ex.Body, ex.Status) == nil, "%v", problemBodyOK(ex.Body, ex.Status))
	if wantStatus == http.StatusUnauthorized {
		ch := ex.Header.Get("WWW-Authenticate")
		r.check(RuleProblemChallenge, len(ch) >= 6 && strings.EqualFold(ch[:6], "bearer"), "WWW-Authenticate %q", ch)
	}
	if token != "" {
		r.check(RuleProblemNoSecret, !strings.Contains(string(ex.Body), token), "the body contains the bearer token")
	}
	return r.out
}

// problemBodyOK checks the RFC 9457 shape the contract's ProblemDetails
// schema requires: an object whose title is a non-empty string and whose
// status equals the HTTP status; type and detail, when present, are
// strings. Extension members are allowed.
func problemBodyOK(body []byte, status int) error {
	root, err := parseJSON(body)
	if err != nil {
		return err
	}
	if !root.isKind('{') {
		return fmt.Errorf("problem body is %s, not an object", root.kindName())
	}
	if t, ok := root.get("title"); !ok || !t.isKind('"') || t.str == "" {
		return errors.New("title must be a non-empty string")
	}
	s, ok := root.get("status")
	if n, isInt := s.integer(); !ok || !isInt || n != int64(status) {
		return fmt.Errorf("status member must be the integer %d", status)
	}
	if t, ok := root.get("type"); ok && !t.isKind('"') {
		return errors.New("type must be a string")
	}
	if t, ok := root.get("detail"); ok && !t.isKind('"') {
		return errors.New("detail must be a string")
	}
	return nil
}
