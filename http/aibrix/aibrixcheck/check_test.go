package aibrixcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/internal/authtoken"
)

const testToken = "check-token-1"

// generousTimeout keeps the conformance test about protocol rules, not
// about scheduling on a loaded CI machine; the deadline rule itself is
// tested with a handler that never answers.
const generousTimeout = 30 * time.Second

func realHandler(t testing.TB, withToken bool) http.Handler {
	t.Helper()
	cfg := aibrix.Config{}
	if withToken {
		tok, err := authtoken.Parse([]byte(testToken + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tokens = tok
	}
	h, err := aibrix.NewHandler(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + aibrix.DefaultPath
}

func TestRealHandlerPassesEveryRule(t *testing.T) {
	url := serve(t, realHandler(t, true))
	rep := Run(context.Background(), Options{URL: url, Token: testToken, Timeout: generousTimeout})
	for _, rr := range rep.Rules {
		if rr.Checks == 0 {
			t.Errorf("rule %s was never checked", rr.ID)
		}
		if rr.Failures != 0 {
			t.Errorf("rule %s failed: %v", rr.ID, rr.Details)
		}
	}
	if !rep.Passed {
		t.Fatal("report did not pass")
	}
	for _, c := range rep.Cases {
		if !c.Passed {
			t.Errorf("case %s failed: %+v", c.Name, c.Failures)
		}
	}
	if len(rep.Cases) != len(Suite("x")) {
		t.Fatalf("ran %d cases, suite has %d", len(rep.Cases), len(Suite("x")))
	}
}

func TestAuthCasesSkippedWithoutToken(t *testing.T) {
	url := serve(t, realHandler(t, false))
	rep := Run(context.Background(), Options{URL: url, Timeout: generousTimeout})
	if !rep.Passed {
		t.Fatalf("report failed: %+v", rep.Cases)
	}
	if rr := rep.Rule(RuleProblemChallenge); rr.Checks != 0 || rr.Status() != "not-checked" {
		t.Fatalf("auth rule checked without a token: %+v", rr)
	}
}

// mutating wraps the real handler and rewrites its answers.
func mutating(t testing.TB, rewrite func(r *http.Request, status int, hdr http.Header, body []byte) (int, http.Header, []byte)) string {
	real := realHandler(t, false)
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		real.ServeHTTP(rec, r)
		status, hdr, body := rewrite(r, rec.Code, rec.Header().Clone(), rec.Body.Bytes())
		for k, v := range hdr {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
}

var targetRE = regexp.MustCompile(`"target":\{[^}]*\}`)

// targetMemberRE matches the target member with its leading comma.
var targetMemberRE = regexp.MustCompile(`,"target":\{[^}]*\}`)

func onlyDecisions(f func(body []byte) []byte) func(*http.Request, int, http.Header, []byte) (int, http.Header, []byte) {
	return func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
		if st == 200 {
			b = f(b)
		}
		return st, h, b
	}
}

func TestBrokenHandlersAreReported(t *testing.T) {
	tests := []struct {
		name     string
		rewrite  func(*http.Request, int, http.Header, []byte) (int, http.Header, []byte)
		rule     string
		required bool
	}{
		{"null target", onlyDecisions(func(b []byte) []byte { return targetRE.ReplaceAll(b, []byte(`"target":null`)) }), RuleNoNullOptional, true},
		{"null reason", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"reason":"LeastLoaded"`), []byte(`"reason":null`), 1)
		}), RuleNoNullOptional, true},
		{"null decisionId", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"decisionId":"[^"]*"`).ReplaceAll(b, []byte(`"decisionId":null`))
		}), RuleNoNullOptional, true},
		{"wrong id echo", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"requestId":"`).ReplaceAll(b, []byte(`"requestId":"x`))
		}), RuleRequestIDEcho, true},
		{"illegal decision for mode", onlyDecisions(func(b []byte) []byte {
			b = targetMemberRE.ReplaceAll(b, nil)
			return bytes.Replace(b, []byte(`"Selected"`), []byte(`"Denied"`), 1)
		}), RuleLegalForMode, true},
		{"bad media type", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st == 200 {
				h.Set("Content-Type", "application/json")
			}
			return st, h, b
		}, RuleMediaTypeGateway, true},
		{"inexact media type", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st == 200 {
				h.Set("Content-Type", "application/vnd.aibrix.external-routing+json; version=v1alpha1")
			}
			return st, h, b
		}, RuleMediaTypeExact, false}, // the Gateway's parse accepts it
		{"duplicate member", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"kind":`), []byte(`"kind":"ReplicaSelectionResponse","kind":`), 1)
		}), RuleNoDuplicates, true},
		{"trailing data", onlyDecisions(func(b []byte) []byte { return append(b, "{}"...) }), RuleNoTrailing, true},
		{"target outside snapshot", onlyDecisions(func(b []byte) []byte {
			return targetRE.ReplaceAll(b, []byte(`"target":{"id":"outside/not-a-candidate","port":8000}`))
		}), RuleTargetInSnapshot, true},
		{"port not advertised", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"port":\d+`).ReplaceAll(b, []byte(`"port":1`))
		}), RulePortAdvertised, true},
		{"port omitted", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`,"port":\d+`).ReplaceAll(b, nil)
		}), RulePortPresent, true}, // required: multi-port candidates also break port-advertised
		{"port as string", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"port":(\d+)`).ReplaceAll(b, []byte(`"port":"$1"`))
		}), RuleTypes, true},
		{"port as float", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"port":(\d+)`).ReplaceAll(b, []byte(`"port":$1.0`))
		}), RuleTypes, true},
		{"wrong case decision", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"Selected"`), []byte(`"selected"`), 1)
		}), RuleDecisionKnown, true},
		{"target on denial", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"decision":"Selected"`), []byte(`"decision":"NoDecision"`), 1)
		}), RuleTargetIffSel, true},
		{"wrong api version", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(aibrix.APIVersion), []byte("routing.aibrix.ai/v1"), 1)
		}), RuleAPIVersion, true},
		{"wrong kind", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(aibrix.KindResponse), []byte(aibrix.KindRequest), 1)
		}), RuleKind, true},
		{"missing status", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`,"status":\{.*\}\}$`).ReplaceAll(b, []byte(`}`))
		}), RuleStatusPresent, true},
		{"long decision id", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"decisionId":"`).ReplaceAll(b, []byte(`"decisionId":"`+strings.Repeat("d", 300)))
		}), RuleDecisionIDBound, true},
		{"long reason", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"reason":"`), []byte(`"reason":"`+strings.Repeat("r", 300)), 1)
		}), RuleReasonBound, true},
		{"repeated decision id", onlyDecisions(func(b []byte) []byte {
			return regexp.MustCompile(`"decisionId":"[^"]*"`).ReplaceAll(b, []byte(`"decisionId":"always-the-same"`))
		}), RuleDecisionIDUnique, false},
		{"empty body", onlyDecisions(func([]byte) []byte { return nil }), RuleNonEmpty, true},
		{"array body", onlyDecisions(func([]byte) []byte { return []byte(`[]`) }), RuleObject, true},
		{"malformed body", onlyDecisions(func(b []byte) []byte { return b[:len(b)-1] }), RuleJSONSyntax, true},
		{"oversized body", onlyDecisions(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"status":`), []byte(`"pad":"`+strings.Repeat("p", 70000)+`","status":`), 1)
		}), RuleBodyLimit, true},
		{"status 201", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st == 200 {
				st = 201
			}
			return st, h, b
		}, RuleStatus200, true},
		{"content encoding", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st == 200 {
				h.Set("Content-Encoding", "br")
			}
			return st, h, b
		}, RuleIdentityEncoding, true},
		{"accepts invalid requests", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st != 200 {
				return 200, http.Header{"Content-Type": {aibrix.MediaType}}, []byte(`{}`)
			}
			return st, h, b
		}, RuleProblemStatus, false}, // the Gateway never sends invalid requests
		{"problem as text", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st != 200 {
				h.Set("Content-Type", "text/plain")
			}
			return st, h, b
		}, RuleProblemMedia, false},
		{"problem without status member", func(_ *http.Request, st int, h http.Header, b []byte) (int, http.Header, []byte) {
			if st != 200 {
				b = []byte(`{"title":"bad"}`)
			}
			return st, h, b
		}, RuleProblemBody, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := mutating(t, tt.rewrite)
			rep := Run(context.Background(), Options{URL: url, Timeout: generousTimeout, Cases: quickSuite()})
			rr := rep.Rule(tt.rule)
			if rr == nil || rr.Failures == 0 {
				t.Fatalf("rule %s not reported as failing: %+v", tt.rule, rr)
			}
			if len(rr.Details) == 0 || rr.Details[0] == "" {
				t.Fatalf("failure without detail: %+v", rr)
			}
			if rep.Passed == tt.required {
				t.Fatalf("report Passed=%v for a %v rule failure", rep.Passed, map[bool]string{true: "required", false: "recommended"}[tt.required])
			}
		})
	}
}

// quickSuite is the standard suite without the 270 KB oversized-body case,
// which the broken-handler tests do not need.
func quickSuite() []Case {
	var out []Case
	for _, c := range Suite("q-") {
		if c.WantStatus != 413 {
			out = append(out, c)
		}
	}
	return out
}

func TestDeadlineIsEnforced(t *testing.T) {
	// The handler answers only once the client has given up, so the
	// deadline is exceeded deterministically without sleeping.
	release := make(chan struct{})
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the server closes
	cl := NewClient(url, "", 20*time.Millisecond)
	cases := Suite("d-")[:1]
	rep := Run(context.Background(), Options{Client: cl, Cases: cases})
	if rr := rep.Rule(RuleDeadline); rr.Failures != 1 {
		t.Fatalf("deadline rule = %+v", rr)
	}
	if rep.Passed {
		t.Fatal("a timed-out exchange must fail the run")
	}
}

func TestChallengeRequired(t *testing.T) {
	real := realHandler(t, true)
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		real.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			if k != "Www-Authenticate" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	rep := Run(context.Background(), Options{URL: url, Token: testToken, Timeout: generousTimeout})
	if rr := rep.Rule(RuleProblemChallenge); rr.Failures != 2 {
		t.Fatalf("challenge rule = %+v", rr)
	}
}

func TestTokenEchoDetected(t *testing.T) {
	real := realHandler(t, true)
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.Header().Set("Content-Type", aibrix.ProblemMediaType)
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"title":"expected ` + testToken + `","status":401}`))
			return
		}
		real.ServeHTTP(w, r)
	}))
	rep := Run(context.Background(), Options{URL: url, Token: testToken, Timeout: generousTimeout})
	if rr := rep.Rule(RuleProblemNoSecret); rr.Failures == 0 {
		t.Fatalf("token echo not detected: %+v", rr)
	}
}

func TestEncodeRequestSortsLikeGateway(t *testing.T) {
	req := &aibrix.Request{RequestID: "r", Model: "m", PolicyMode: aibrix.Advisory,
		PolicyContext: aibrix.Attributes{{Name: "z", Value: "1"}, {Name: "a", Value: "2"}},
		Candidates:    []aibrix.Candidate{{ID: "ns/b", Ports: []int{9, 1}}, {ID: "ns/a", Ports: []int{5}}}}
	got := string(EncodeRequest(req))
	want := `{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"r"},"spec":{"model":"m","policyMode":"Advisory","policyContext":{"attributes":{"a":"2","z":"1"}},"candidates":[{"id":"ns/a","ports":[5]},{"id":"ns/b","ports":[1,9]}]}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if req.Candidates[0].ID != "ns/b" || req.Candidates[0].Ports[0] != 9 {
		t.Fatal("EncodeRequest mutated its input")
	}
}

func TestSuiteBodiesAreWhatTheyClaim(t *testing.T) {
	for _, c := range Suite("s-") {
		if c.Method != "" {
			continue
		}
		body := c.Body
		if body == nil && c.Sent != nil {
			body = EncodeRequest(c.Sent)
		}
		_, err := aibrix.DecodeRequest(body)
		// Decision cases and header-only rejections carry valid bodies;
		// body rejections carry invalid ones (413 is about size only).
		bodyInvalid := c.WantStatus == 400 && c.Header == nil
		if bodyInvalid != (err != nil) {
			t.Errorf("case %s: decode err = %v, want invalid=%v", c.Name, err, bodyInvalid)
		}
		if c.WantStatus == 413 && len(body) <= aibrix.DefaultMaxRequestBytes {
			t.Errorf("case %s: body is only %d bytes", c.Name, len(body))
		}
	}
}

func TestMain_(t *testing.T) {
	url := serve(t, realHandler(t, true))
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("# gateway token\n"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"--url", url, "--token-file", tokFile, "--timeout", "5s", "--json"}, &out, &errOut)
	if code != ExitPass {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
	var rep struct {
		Passed bool
		Rules  []struct{ ID, Status string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out.String())
	}
	if !rep.Passed || len(rep.Rules) != len(Rules) || rep.Rules[0].Status != "pass" {
		t.Fatalf("report = %+v", rep)
	}
	if strings.Contains(out.String()+errOut.String(), testToken) {
		t.Fatal("the token was printed")
	}

	out.Reset()
	code = Main([]string{"--url", url, "--timeout", "5s"}, &out, &errOut)
	if code != ExitFail || !strings.Contains(out.String(), "FAIL") {
		t.Fatalf("without a token the server rejects every decision: exit %d\n%s", code, out.String())
	}

	for _, args := range [][]string{
		{},
		{"--url", "ftp://x/y"},
		{"--url", "http://u:p@host/x"},
		{"--url", url, "--timeout", "0s"},
		{"--url", url, "extra"},
		{"--url", url, "--token-file", filepath.Join(dir, "missing")},
		{"--bogus"},
	} {
		errOut.Reset()
		if code := Main(args, &out, &errOut); code != ExitUsage || errOut.Len() == 0 {
			t.Errorf("Main(%q) = %d, stderr %q", args, code, errOut.String())
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"--url", url, "--token-file", empty}, &out, &errOut); code != ExitUsage {
		t.Errorf("empty token file exit %d", code)
	}
}

func TestRuleCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules {
		if seen[r.ID] || r.Description == "" || (r.Level != Required && r.Level != Recommended) {
			t.Errorf("bad or duplicate rule %+v", r)
		}
		seen[r.ID] = true
	}
}
