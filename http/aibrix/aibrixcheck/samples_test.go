package aibrixcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"
)

// Stand-ins for AIBrix's two sample decision services, reproducing their observable HTTP
// behaviour as read from their source in vllm-project/aibrix (written here from that reading,
// not copied):
//
//   - samples/external-replica-router/decision-service/router.py (commit 2dbc9994…): Python
//     http.server, POST /v1alpha1/select only. Other methods have no do_* handler, so
//     BaseHTTPRequestHandler answers 501 with an HTML page; a Content-Length outside 1..262144
//     is answered 400 without reading the body; json.loads accepts duplicate members (the last
//     wins) and rejects trailing data; decide() checks apiVersion/kind, metadata/spec objects,
//     non-empty requestId and model, policyMode, non-empty candidates with a non-empty id and
//     non-empty integer (not bool) ports in 1..65535, attributes absent or an object; it does
//     not look at the media type, X-Request-Id, duplicate ids or ports, or metrics. It selects
//     the lowest candidate id (PREFERRED_ZONE unset, model not premium) with its smallest port.
//     Failures are 400 application/problem+json {"title","status"}; HTTP/1.0, one request per
//     connection.
//   - samples/external-replica-router/jev-decision-service/{handler.go,protocol.go} (commits
//     cc07adbf…, 6430831d…): Go net/http; a non-POST gets 405 with Allow: POST and an empty
//     body; Content-Length 0 or > 262144 → 400; encoding/json into typed structs (case-
//     insensitive names, duplicates last-wins, unknown members ignored), trailing values → 400;
//     validateRequest checks envelope, requestId, model, policyMode, non-empty candidates with
//     unique non-empty ids and ports in 1..65535. The choice comes from an upstream "Jev"
//     service; the stand-in's upstream answers the lowest candidate id, which the sample
//     accepts, returning Selected with that candidate's smallest port.
//
// The Gateway accepts both samples' decisions; the checker's Required rules must too.

// problem400 writes the samples' rejection shape.
func problem400(w http.ResponseWriter, title string) {
	b, _ := json.Marshal(map[string]any{"title": title, "status": 400})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// selected writes a Selected decision for id:port echoing requestID, compact, with the exact
// media type and no decisionId (both samples). Map keys marshal sorted, which is also the
// samples' member order.
func selected(w http.ResponseWriter, requestID, id string, port int) {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "routing.aibrix.ai/v1alpha1",
		"kind":       "ReplicaSelectionResponse",
		"metadata":   map[string]any{"requestId": requestID},
		"status":     map[string]any{"decision": "Selected", "target": map[string]any{"id": id, "port": port}},
	})
	w.Header().Set("Content-Type", "application/vnd.aibrix.external-routing+json;version=v1alpha1")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// pythonSample stands in for router.py.
func pythonSample() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // HTTP/1.0 server
		if r.Method != http.MethodPost {
			w.Header().Set("Content-Type", "text/html;charset=utf-8")
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = io.WriteString(w, "<html><body><h1>Error response</h1><p>Error code: 501</p></body></html>")
			return
		}
		if r.URL.Path != "/v1alpha1/select" {
			w.Header().Set("Content-Type", "text/html;charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		n, err := strconv.Atoi(r.Header.Get("Content-Length"))
		if err != nil || n <= 0 || n > 262144 {
			problem400(w, "invalid body size")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(n)))
		if err != nil {
			problem400(w, "invalid body size")
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			problem400(w, "Expecting value")
			return
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			problem400(w, "Extra data")
			return
		}
		id, port, rid, why := pythonDecide(doc)
		if why != "" {
			problem400(w, why)
			return
		}
		selected(w, rid, id, port)
	})
}

// pythonDecide applies decide()'s checks and choice to a json.loads-like document.
func pythonDecide(doc any) (id string, port int, requestID, why string) {
	top, ok := doc.(map[string]any)
	if !ok {
		return "", 0, "", "request body must be an object"
	}
	if top["apiVersion"] != "routing.aibrix.ai/v1alpha1" || top["kind"] != "ReplicaSelectionRequest" {
		return "", 0, "", "unsupported request envelope"
	}
	md, ok1 := top["metadata"].(map[string]any)
	spec, ok2 := top["spec"].(map[string]any)
	if !ok1 || !ok2 {
		return "", 0, "", "metadata and spec must be objects"
	}
	rid, _ := md["requestId"].(string)
	model, _ := spec["model"].(string)
	if rid == "" || model == "" {
		return "", 0, "", "requestId and model are required"
	}
	if m := spec["policyMode"]; m != "Advisory" && m != "Authoritative" {
		return "", 0, "", "policyMode must be Advisory or Authoritative"
	}
	cands, ok := spec["candidates"].([]any)
	if !ok || len(cands) == 0 {
		return "", 0, "", "requestId and candidates are required"
	}
	type cand struct {
		id    string
		ports []int
	}
	var cs []cand
	for _, c := range cands {
		obj, ok := c.(map[string]any)
		if !ok {
			return "", 0, "", "each candidate must be an object"
		}
		cid, _ := obj["id"].(string)
		if cid == "" {
			return "", 0, "", "candidate id is required"
		}
		raw, ok := obj["ports"].([]any)
		if !ok || len(raw) == 0 {
			return "", 0, "", "candidate ports must be non-empty integers in range 1-65535"
		}
		var ports []int
		for _, p := range raw {
			num, isNum := p.(json.Number) // booleans and strings are not numbers
			v, err := strconv.Atoi(string(num))
			if !isNum || err != nil || v < 1 || v > 65535 {
				return "", 0, "", "candidate ports must be non-empty integers in range 1-65535"
			}
			ports = append(ports, v)
		}
		if a, present := obj["attributes"]; present && a != nil {
			if _, isObj := a.(map[string]any); !isObj {
				return "", 0, "", "candidate attributes must be an object"
			}
		}
		cs = append(cs, cand{cid, ports})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].id < cs[j].id })
	return cs[0].id, slices.Min(cs[0].ports), rid, ""
}

// jevSample stands in for jev-decision-service with an upstream that picks the lowest id.
func jevSample() http.Handler {
	type candidate struct {
		ID         string            `json:"id"`
		Ports      []int             `json:"ports"`
		Attributes map[string]string `json:"attributes"`
		Metrics    *struct {
			RunningRequests   *int64   `json:"runningRequests"`
			EngineUtilization *float64 `json:"engineUtilization"`
			KVCacheUsage      *float64 `json:"kvCacheUsage"`
		} `json:"metrics"`
	}
	type request struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			RequestID string `json:"requestId"`
		} `json:"metadata"`
		Spec struct {
			Model         string `json:"model"`
			PolicyMode    string `json:"policyMode"`
			PolicyContext *struct {
				Attributes map[string]string `json:"attributes"`
			} `json:"policyContext"`
			Candidates []candidate `json:"candidates"`
		} `json:"spec"`
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1alpha1/select", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength == 0 || r.ContentLength > 262144 {
			problem400(w, "invalid body size")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 262144))
		if err != nil || len(body) == 0 {
			problem400(w, "invalid request body")
			return
		}
		var req request
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&req); err != nil {
			problem400(w, "invalid JSON request")
			return
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			problem400(w, "invalid JSON request")
			return
		}
		if req.APIVersion != "routing.aibrix.ai/v1alpha1" || req.Kind != "ReplicaSelectionRequest" || req.Metadata.RequestID == "" ||
			req.Spec.Model == "" || (req.Spec.PolicyMode != "Advisory" && req.Spec.PolicyMode != "Authoritative") || len(req.Spec.Candidates) == 0 {
			problem400(w, "invalid request envelope")
			return
		}
		seen := map[string]bool{}
		for _, c := range req.Spec.Candidates {
			if c.ID == "" || seen[c.ID] || len(c.Ports) == 0 {
				problem400(w, "invalid candidate")
				return
			}
			seen[c.ID] = true
			for _, p := range c.Ports {
				if p < 1 || p > 65535 {
					problem400(w, "invalid candidate port")
					return
				}
			}
		}
		best := slices.MinFunc(req.Spec.Candidates, func(a, b candidate) int {
			if a.ID < b.ID {
				return -1
			}
			if a.ID > b.ID {
				return 1
			}
			return 0
		})
		selected(w, req.Metadata.RequestID, best.ID, slices.Min(best.Ports))
	})
	mux.HandleFunc("/", http.NotFound)
	return mux
}

// AIBrix's own samples pass the Gateway, so they pass every Required rule; what they do
// differently from kvselect's reading of the contract (400 instead of 413 or 415, 501 or an
// empty 405 for GET, accepting requests kvselect rejects) shows as Recommended failures.
func TestAIBrixSamplesPassRequiredRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"router.py", pythonSample()}, {"jev-decision-service", jevSample()}} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Run(t.Context(), Options{URL: serve(t, tc.h), Timeout: generousTimeout})
			var warned []string
			for _, rr := range rep.Rules {
				if rr.Failures == 0 {
					continue
				}
				if rr.Level == Required {
					t.Errorf("required rule %s failed: %v", rr.ID, rr.Details)
				} else {
					warned = append(warned, rr.ID)
				}
			}
			if !rep.Passed {
				t.Error("report failed")
			}
			for _, id := range []string{RuleTargetInSnapshot, RulePortAdvertised, RuleRequestIDEcho, RuleLegalForMode} {
				if rr := rep.Rule(id); rr.Checks == 0 {
					t.Errorf("rule %s never checked", id)
				}
			}
			if !slices.Contains(warned, RuleProblemStatus) {
				t.Errorf("the sample's differing rejections were not reported (recommended failures %v)", warned)
			}
			t.Logf("recommended failures: %v", warned)
		})
	}
}

// twinAfter inserts member (a `"Name":value` pair) as the last member of the object that
// starts at the first match of open, which must not contain a nested object.
func twinAfter(b []byte, open, member string) []byte {
	i := bytes.Index(b, []byte(open))
	if i < 0 {
		return b
	}
	j := i + bytes.IndexByte(b[i+len(open):], '}') + len(open)
	return slices.Concat(b[:j], []byte(","+member), b[j:])
}

// A valid decision plus a case-variant twin that comes later is read by the Gateway's
// encoding/json as the canonical member (it wins, or merges into it), so the Gateway rejects
// the response; the checker must fail a Required rule. The same twin placed first is
// overridden by the canonical member: the Gateway accepts, and only the Recommended exact-names
// rule reports it.
func TestCaseVariantTwins(t *testing.T) {
	atEnd := func(member string) func([]byte) []byte {
		return func(b []byte) []byte { return slices.Concat(b[:len(b)-1], []byte(","+member+"}")) }
	}
	for _, tc := range []struct {
		name     string
		edit     func([]byte) []byte
		required string // the Required rule that must fail; "" when the Gateway accepts
	}{
		{"Status twin", atEnd(`"Status":{"decision":"NoDecision"}`), RuleTargetIffSel},
		{"metadata.RequestId twin", func(b []byte) []byte { return twinAfter(b, `"metadata":{`, `"RequestId":"someone-else"`) }, RuleRequestIDEcho},
		{"APIVersion twin", atEnd(`"APIVersion":"routing.aibrix.ai/v1"`), RuleAPIVersion},
		{"Kind twin", atEnd(`"KIND":"ReplicaSelectionRequest"`), RuleKind},
		{"null Status twin", atEnd(`"Status":null`), RuleStatusPresent},
		{"Status twin first", func(b []byte) []byte {
			return slices.Concat([]byte(`{"Status":{"decision":"NoDecision"},`), b[1:])
		}, ""},
		{"variant only", func(b []byte) []byte { return bytes.Replace(b, []byte(`"kind":`), []byte(`"Kind":`), 1) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Run(t.Context(), Options{URL: mutating(t, onlyDecisions(tc.edit)), Timeout: generousTimeout, Cases: quickSuite()})
			if rr := rep.Rule(RuleExactNames); rr.Failures == 0 {
				t.Errorf("exact-names rule did not report the twin: %+v", rr)
			}
			if tc.required == "" {
				if !rep.Passed {
					for _, rr := range rep.Rules {
						if rr.Level == Required && rr.Failures > 0 {
							t.Errorf("required rule %s failed on a body the Gateway accepts: %v", rr.ID, rr.Details[0])
						}
					}
				}
				return
			}
			if rr := rep.Rule(tc.required); rr.Failures == 0 || rep.Passed {
				t.Fatalf("rule %s did not fail (passed=%v): %+v", tc.required, rep.Passed, rr)
			}
		})
	}
}

// The media-type rule accepts what the Gateway's mime.ParseMediaType reading accepts.
func TestGatewayMediaTypeVariantsAccepted(t *testing.T) {
	for _, ct := range []string{
		"application/vnd.aibrix.external-routing+json; version=v1alpha1",
		"application/vnd.aibrix.external-routing+json;version=v1alpha1;charset=utf-8",
		`application/vnd.aibrix.external-routing+json; version="v1alpha1"`,
		"Application/VND.aibrix.External-Routing+JSON; Version=v1alpha1",
		"application/vnd.aibrix.external-routing+json ; version = v1alpha1",
	} {
		t.Run(ct, func(t *testing.T) {
			rep := Run(t.Context(), Options{URL: mutating(t, func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
				if st == 200 {
					h.Set("Content-Type", ct)
				}
				return st, h, b
			}), Timeout: generousTimeout, Cases: quickSuite()})
			if !rep.Passed || rep.Rule(RuleMediaTypeGateway).Failures != 0 {
				t.Fatalf("Content-Type %q refused: %v", ct, rep.Rule(RuleMediaTypeGateway).Details)
			}
			if rep.Rule(RuleMediaTypeExact).Failures == 0 {
				t.Fatalf("Content-Type %q not reported as inexact", ct)
			}
		})
	}
	for _, ct := range []string{"application/vnd.aibrix.external-routing+json; version=V1alpha1", "application/json", ""} {
		if gatewayMediaTypeOK(ct) {
			t.Errorf("%q accepted; the Gateway refuses it", ct)
		}
	}
}
