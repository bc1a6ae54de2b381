package aibrixcheck

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/http/aibrix"
)

// Case is one request of the conformance suite. Exactly one of two kinds:
// a decision case (WantStatus == 0) sends Sent and validates the answer
// with [ValidateDecision]; a rejection case expects WantStatus with
// Problem Details ([ValidateProblem]).
type Case struct {
	Name        string
	Description string
	Method      string          // default POST
	Sent        *aibrix.Request // decision cases; also the body source when Body is nil
	Body        []byte          // raw body overriding Sent's encoding
	Header      func(c *Client, h http.Header)
	WantStatus  int
	NeedsToken  bool // run only when the client has a token
}

// Suite returns the standard cases. Decision cases come first (so the
// first exchange, which pays for the TCP connect, is a plain decision),
// then rejections. The bodies of rejection cases differ from a valid body
// in exactly one way, so a service that answers 200 to one of them has a
// single, identifiable validation gap. Request ids are prefixed with prefix so
// runs are distinguishable in the service's logs.
func Suite(prefix string) []Case {
	rid := func(s string) string { return prefix + s }
	cand := func(id string, ports ...int) aibrix.Candidate { return aibrix.Candidate{ID: id, Ports: ports} }
	withMetrics := func(c aibrix.Candidate, running int64, kv float64) aibrix.Candidate {
		c.Metrics = aibrix.Metrics{RunningRequests: running, HasRunningRequests: true, KVCacheUsage: kv, HasKVCacheUsage: true}
		return c
	}
	zone := func(c aibrix.Candidate, z string) aibrix.Candidate {
		c.Attributes = aibrix.Attributes{{Name: "topology.kubernetes.io/zone", Value: z}}
		return c
	}
	base := func(id string, mode aibrix.PolicyMode, cs ...aibrix.Candidate) *aibrix.Request {
		return &aibrix.Request{RequestID: rid(id), Model: "llama-3", PolicyMode: mode, Candidates: cs}
	}
	three := func(id string, mode aibrix.PolicyMode) *aibrix.Request {
		return base(id, mode,
			zone(withMetrics(cand("default/llama-3-a", 8000), 4, 0.48), "cn-east-1a"),
			zone(withMetrics(cand("default/llama-3-b", 8000), 1, 0.10), "cn-east-1b"),
			zone(cand("default/llama-3-c", 8000), "cn-east-1a"))
	}
	large := base("large", aibrix.Advisory)
	for i := 0; i < 128; i++ {
		c := zone(withMetrics(cand(fmt.Sprintf("ml/qwen2-7b-%03d", i), 8000, 8001), int64(i%7), float64(i%10)/10), fmt.Sprintf("z%d", i%3))
		large.Candidates = append(large.Candidates, c)
	}
	ctxReq := three("policy-context", aibrix.Advisory)
	ctxReq.PolicyContext = aibrix.Attributes{{Name: "tenantTier", Value: "gold"}}
	valid := three("unknown-members", aibrix.Advisory)
	withUnknown := bytes.Replace(EncodeRequest(valid), []byte(`{"apiVersion"`), []byte(`{"future":{"ok":true},"apiVersion"`), 1)
	withUnknown = bytes.Replace(withUnknown, []byte(`"ports":[8000]`), []byte(`"ports":[8000],"weight":null`), 1)

	cases := []Case{
		{Name: "advisory-basic", Description: "Advisory, three single-port candidates with attributes and metrics", Sent: three("advisory-basic", aibrix.Advisory)},
		{Name: "advisory-multi-port", Description: "Advisory, a data-parallel candidate with four ports",
			Sent: base("advisory-multi-port", aibrix.Advisory, cand("ml/dp-0", 8003, 8000, 8001, 8002), cand("ml/single", 9000))},
		{Name: "advisory-single-candidate", Description: "Advisory with one candidate (the Gateway may call for multi-port pods)",
			Sent: base("advisory-single", aibrix.Advisory, cand("default/only", 8000, 8001))},
		{Name: "authoritative-basic", Description: "Authoritative, three candidates", Sent: three("authoritative-basic", aibrix.Authoritative)},
		{Name: "authoritative-single-candidate", Description: "Authoritative always calls, even for one candidate",
			Sent: base("authoritative-single", aibrix.Authoritative, cand("default/only", 8000))},
		{Name: "escaped-request-id", Description: "requestId with characters JSON must escape is echoed exactly",
			Sent: three(`id-"quoted"-<tag>&amp;-\back-é-`+"\u2028", aibrix.Advisory)},
		{Name: "max-request-id", Description: "requestId of 256 bytes", Sent: three(strings.Repeat("r", 256-len(prefix)), aibrix.Advisory)},
		{Name: "policy-context", Description: "Trusted policyContext attributes are present", Sent: ctxReq},
		{Name: "large-snapshot", Description: "128 candidates with two ports, attributes and metrics", Sent: large},
		{Name: "unknown-members", Description: "Unknown request members (additive alpha evolution) are ignored", Sent: valid, Body: withUnknown},

		{Name: "reject-api-version", Description: "wrong apiVersion", WantStatus: 400,
			Body: mutate(three("bad-api", aibrix.Advisory), `"routing.aibrix.ai/v1alpha1"`, `"routing.aibrix.ai/v1"`)},
		{Name: "reject-kind", Description: "wrong kind", WantStatus: 400,
			Body: mutate(three("bad-kind", aibrix.Advisory), `"ReplicaSelectionRequest"`, `"ReplicaSelectionResponse"`)},
		{Name: "reject-empty-request-id", Description: "empty metadata.requestId", WantStatus: 400,
			Body: mutate(three("x", aibrix.Advisory), `"requestId":"`+rid("x")+`"`, `"requestId":""`)},
		{Name: "reject-policy-mode", Description: "policyMode outside the enum", WantStatus: 400,
			Body: mutate(three("bad-mode", aibrix.Advisory), `"Advisory"`, `"advisory"`)},
		{Name: "reject-empty-candidates", Description: "empty candidates array", WantStatus: 400,
			Body: []byte(`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"` + rid("empty") + `"},"spec":{"model":"m","policyMode":"Advisory","candidates":[]}}`)},
		{Name: "reject-duplicate-candidate", Description: "two candidates with one id", WantStatus: 400,
			Body: mutate(three("dup-cand", aibrix.Advisory), `"default/llama-3-b"`, `"default/llama-3-a"`)},
		{Name: "reject-candidate-id-shape", Description: "candidate id without namespace", WantStatus: 400,
			Body: mutate(three("bad-id", aibrix.Advisory), `"default/llama-3-b"`, `"llama-3-b"`)},
		{Name: "reject-port-range", Description: "port 70000", WantStatus: 400,
			Body: mutate(base("bad-port", aibrix.Advisory, cand("a/b", 8000)), `[8000]`, `[70000]`)},
		{Name: "reject-duplicate-port", Description: "port listed twice", WantStatus: 400,
			Body: mutate(base("dup-port", aibrix.Advisory, cand("a/b", 8000)), `[8000]`, `[8000,8000]`)},
		{Name: "reject-ratio-range", Description: "kvCacheUsage above 1", WantStatus: 400,
			Body: mutate(three("bad-ratio", aibrix.Advisory), `"kvCacheUsage":0.48`, `"kvCacheUsage":1.5`)},
		{Name: "reject-duplicate-member", Description: "duplicate JSON member", WantStatus: 400,
			Body: mutate(three("dup-member", aibrix.Advisory), `"model":"llama-3"`, `"model":"llama-3","model":"llama-3"`)},
		{Name: "reject-trailing-data", Description: "a second JSON value after the request", WantStatus: 400,
			Body: append(EncodeRequest(three("trailing", aibrix.Advisory)), " {}"...)},
		{Name: "reject-malformed-json", Description: "truncated JSON", WantStatus: 400,
			Body: EncodeRequest(three("malformed", aibrix.Advisory))[:40]},
		{Name: "reject-empty-body", Description: "empty body", WantStatus: 400, Body: []byte{}},
		{Name: "reject-request-id-header", Description: "X-Request-Id differs from metadata.requestId", WantStatus: 400,
			Sent: three("hdr", aibrix.Advisory), Header: func(_ *Client, h http.Header) { h.Set("X-Request-Id", "something-else") }},
		{Name: "reject-media-type", Description: "Content-Type application/json", WantStatus: 415,
			Sent: three("media", aibrix.Advisory), Header: func(_ *Client, h http.Header) { h.Set("Content-Type", "application/json") }},
		{Name: "reject-method", Description: "GET instead of POST", WantStatus: 405, Method: http.MethodGet, Body: []byte{}},
		{Name: "reject-oversized-body", Description: "body larger than 256 KiB", WantStatus: 413, Body: oversized(rid("big"))},
		{Name: "auth-missing-token", Description: "no Authorization header", WantStatus: 401, NeedsToken: true,
			Sent: three("auth-none", aibrix.Advisory), Header: func(_ *Client, h http.Header) { h.Del("Authorization") }},
		{Name: "auth-wrong-token", Description: "wrong bearer token", WantStatus: 401, NeedsToken: true,
			Sent: three("auth-wrong", aibrix.Advisory), Header: func(c *Client, h http.Header) { h.Set("Authorization", "Bearer wrong-"+c.Token) }},
	}
	return cases
}

// mutate encodes req and replaces the first occurrence of old with new,
// producing a body that is invalid in exactly one way.
func mutate(req *aibrix.Request, old, new string) []byte {
	return bytes.Replace(EncodeRequest(req), []byte(old), []byte(new), 1)
}

// oversized builds a syntactically valid request just over 256 KiB.
func oversized(id string) []byte {
	req := &aibrix.Request{RequestID: id, Model: "m", PolicyMode: aibrix.Advisory}
	pad := strings.Repeat("p", 200)
	for i := 0; len(req.Candidates)*230 < aibrix.DefaultMaxRequestBytes+4096; i++ {
		req.Candidates = append(req.Candidates, aibrix.Candidate{ID: fmt.Sprintf("ns/%s-%05d", pad, i), Ports: []int{8000}})
	}
	return EncodeRequest(req)
}

// requestIDOf extracts the request id to put in X-Request-Id for a raw
// body: the Sent request's id, or the best-effort id found in the body.
func requestIDOf(c *Case) string {
	if c.Sent != nil {
		return c.Sent.RequestID
	}
	if req, err := aibrix.DecodeRequest(c.Body); err == nil {
		return req.RequestID
	}
	const key = `"requestId":"`
	if i := bytes.Index(c.Body, []byte(key)); i >= 0 {
		rest := c.Body[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			return string(rest[:j])
		}
	}
	return "aibrix-check"
}

// RunCase performs one case and returns its rule results. Decision cases
// are validated against the request that was actually encoded and sent
// (c.Sent), which is what makes the snapshot rules meaningful; rejection
// cases only need the expected status and the token to look for.
func RunCase(ctx context.Context, cl *Client, c *Case) ([]Result, *Decision) {
	body := c.Body
	if body == nil && c.Sent != nil {
		body = EncodeRequest(c.Sent)
	}
	method := c.Method
	if method == "" {
		method = http.MethodPost
	}
	h := cl.GatewayHeaders(requestIDOf(c))
	if c.Header != nil {
		c.Header(cl, h)
	}
	ex := cl.Do(ctx, method, body, h)
	if c.WantStatus != 0 {
		return ValidateProblem(ex, c.WantStatus, cl.Token), nil
	}
	return ValidateDecision(ex, c.Sent)
}
