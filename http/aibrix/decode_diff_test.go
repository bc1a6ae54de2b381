package aibrix

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The decoder (DecodeRequest, on jsontext) is held to the former tree
// decoder (decodeTree, decodetree_test.go) by one property: on every body
// both give the same verdict; accepted bodies decode to equal Requests;
// rejected ones wrap the same sentinel, and for every error but malformed
// JSON (whose wording is jsontext's) name the same Field with the same
// Detail. These tests check the property on hand-picked, random and
// mutated bodies.

// checkAgainstTree fails t when the decoders disagree on body. It reports
// whether body was accepted.
func checkAgainstTree(t testing.TB, body []byte) bool {
	t.Helper()
	got, err := DecodeRequest(body)
	want, wantErr := decodeTree(body)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("verdicts differ on\n%q\ndecoder: %v\ntree:    %v", body, err, wantErr)
	}
	if err != nil {
		var re, wre *RequestError
		if !errors.As(err, &re) || !errors.As(wantErr, &wre) {
			t.Fatalf("errors are not *RequestError: %T %T", err, wantErr)
		}
		if !errors.Is(err, errors.Unwrap(wantErr)) {
			t.Fatalf("sentinels differ on\n%q\ndecoder: %v\ntree:    %v", body, err, wantErr)
		}
		if !errors.Is(err, ErrMalformedJSON) && (re.Field != wre.Field || re.Title != wre.Title ||
			(!errors.Is(err, ErrDuplicateMember) && !errors.Is(err, ErrTrailingData) && re.Detail != wre.Detail)) {
			t.Fatalf("errors differ on\n%q\ndecoder: %+v\ntree:    %+v", body, re, wre)
		}
		return false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoders disagree on\n%q\ndecoder: %+v\ntree:    %+v", body, got, want)
	}
	checkWindows(t, got)
	return true
}

// checkWindows asserts the aliasing invariant of decoded requests: every
// ports and attributes slice is a window with len == cap.
func checkWindows(t testing.TB, r *Request) {
	t.Helper()
	if len(r.PolicyContext) != cap(r.PolicyContext) {
		t.Fatalf("policyContext window len %d cap %d", len(r.PolicyContext), cap(r.PolicyContext))
	}
	for i, c := range r.Candidates {
		if len(c.Ports) != cap(c.Ports) || len(c.Attributes) != cap(c.Attributes) {
			t.Fatalf("candidate %d windows: ports %d/%d attributes %d/%d", i, len(c.Ports), cap(c.Ports), len(c.Attributes), cap(c.Attributes))
		}
	}
}

func TestDecodeAcceptsGatewayRequests(t *testing.T) {
	escaped := benchRequest(3)
	escaped.RequestID = "a<b>&\"c\u2028\\d😀"
	escaped.Candidates[1].Attributes = Attributes{{"zone", "é<&>\"\t"}}
	empty := benchRequest(2)
	empty.Candidates[0].Attributes = Attributes{}
	empty.PolicyContext = nil
	tests := []struct {
		name string
		body []byte
	}{
		{"base document", mustJSON(t, baseDoc())},
		{"one candidate", AppendRequest(nil, benchRequest(1))},
		{"8 candidates", AppendRequest(nil, benchRequest(8))},
		{"9 candidates (map duplicate check)", AppendRequest(nil, benchRequest(9))},
		{"128 candidates", AppendRequest(nil, benchRequest(128))},
		{"escaped strings", AppendRequest(nil, escaped)},
		{"no policy context", AppendRequest(nil, empty)},
		{"unknown members", []byte(`{"x":[1,{"a":null,"b":[true,false]},"s\n"],"apiVersion":"routing.aibrix.ai/v1alpha1",` +
			`"kind":"ReplicaSelectionRequest","metadata":{"requestId":"r","decisionId":"d"},"spec":{"model":"m",` +
			`"policyMode":"Authoritative","policyContext":{"other":{},"attributes":{}},"candidates":[{"id":"a/b",` +
			`"ports":[2,1],"metrics":{"future":-1.5e3},"extra":{"k":"v"}}],"priority":null},"z":-0}`)},
		{"whitespace everywhere", []byte(" \n{ \"apiVersion\" : \"routing.aibrix.ai/v1alpha1\" ,\t\"kind\":\"ReplicaSelectionRequest\"," +
			"\r\n\"metadata\" : { \"requestId\" : \"r\" } , \"spec\" : { \"model\" : \"m\" , \"policyMode\" : \"Advisory\" ," +
			" \"candidates\" : [ { \"id\" : \"a/b\" , \"ports\" : [ 8000 , 1 ] , \"metrics\" : { \"runningRequests\" : 0 ," +
			" \"kvCacheUsage\" : 1 , \"engineUtilization\" : 0.0 } } ] } } \n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !checkAgainstTree(t, tt.body) {
				t.Fatalf("rejected an ordinary request:\n%s", tt.body)
			}
		})
	}
}

// TestDecodeUnusualBodies pins bodies the former single-pass decoder left to
// the tree decoder: all invalid, or valid but spelled unusually.
func TestDecodeUnusualBodies(t *testing.T) {
	good := string(AppendRequest(nil, benchRequest(2)))
	tests := []struct {
		name  string
		body  string
		valid bool
	}{
		{"empty", "", false},
		{"trailing value", good + " {}", false},
		{"duplicate top member", strings.Replace(good, `"kind"`, `"kind":"x","kind"`, 1), false},
		{"duplicate candidate id", strings.Replace(good, "qwen2-7b-0001", "qwen2-7b-0000", 1), false},
		{"duplicate port", strings.Replace(good, "[8000,8001]", "[8000,8000]", 1), false},
		{"port zero", strings.Replace(good, "[8000,8001]", "[0,8001]", 1), false},
		{"leading zero port", strings.Replace(good, "[8000,8001]", "[08000,8001]", 1), false},
		{"escaped member name", strings.Replace(good, `"model"`, `"mod\u0065l"`, 1), true},
		{"exponent port", strings.Replace(good, "[8000,8001]", "[8e3,8001]", 1), true},
		{"fraction running", strings.Replace(good, `"runningRequests":0`, `"runningRequests":0.0`, 1), true},
		{"deep unknown", strings.Replace(good, `"spec"`, `"x":`+strings.Repeat("[", 50)+strings.Repeat("]", 50)+`,"spec"`, 1), true},
		{"too deep unknown", strings.Replace(good, `"spec"`, `"x":`+strings.Repeat("[", 70)+strings.Repeat("]", 70)+`,"spec"`, 1), false},
		{"33 attributes", strings.Replace(good, `"attributes":{`, `"attributes":{`+manyAttrJSON(32)+`,`, 1), false},
		{"lone surrogate", strings.Replace(good, `"s-1"`, `"\ud800"`, 1), false},
		{"invalid utf8", strings.Replace(good, `"s-1"`, "\"\xff\"", 1), false},
		{"ratio overflow", strings.Replace(good, `"kvCacheUsage":0`, `"kvCacheUsage":1e999`, 1), false},
		{"id with two slashes", strings.Replace(good, "ml/qwen2-7b-0000", "ml/q/0", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.body == good {
				t.Fatal("test body was not modified")
			}
			checkAgainstTree(t, []byte(tt.body))
			_, err := DecodeRequest([]byte(tt.body))
			if (err == nil) != tt.valid {
				t.Fatalf("DecodeRequest err = %v, want valid=%v", err, tt.valid)
			}
		})
	}
}

func manyAttrJSON(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"a%d":"v"`, i)
	}
	return b.String()
}

// randomRequest builds a valid request with random shape and content,
// including strings that need escaping and multi-byte characters.
func randomRequest(r *rand.Rand) *Request {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	text := func() string {
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString(pick("a", "Z", "0", "-", "é", "<", "&", "\"", "\\", "\u2028", "😀", " ", "\n"))
		}
		return b.String()
	}
	attrs := func() Attributes {
		if r.IntN(3) == 0 {
			return nil
		}
		var a Attributes
		for i := r.IntN(5); i > 0; i-- {
			a = append(a, Attribute{Name: pick("zone", "topology.kubernetes.io/zone", "tier_1", "x-y") + fmt.Sprint(len(a)), Value: text()})
		}
		if a == nil {
			a = Attributes{}
		}
		return a
	}
	req := &Request{RequestID: pick("r", "5b0f7c1e-3d7a", "") + text(), Model: "m" + text(),
		PolicyMode: []PolicyMode{Advisory, Authoritative}[r.IntN(2)], PolicyContext: attrs()}
	for i := r.IntN(20); i >= 0; i-- {
		c := Candidate{ID: fmt.Sprintf("ns%d/pod-%d", r.IntN(3), len(req.Candidates)), Attributes: attrs()}
		for p := 1 + r.IntN(3); p > 0; p-- {
			c.Ports = append(c.Ports, 1+len(c.Ports)*1000+r.IntN(999))
		}
		m := &c.Metrics
		m.HasRunningRequests, m.RunningRequests = r.IntN(2) == 0, int64(r.IntN(100))
		m.HasKVCacheUsage, m.KVCacheUsage = r.IntN(2) == 0, r.Float64()
		m.HasEngineUtilization, m.EngineUtilization = r.IntN(2) == 0, float64(r.IntN(3))/2
		if !m.HasRunningRequests {
			m.RunningRequests = 0
		}
		if !m.HasKVCacheUsage {
			m.KVCacheUsage = 0
		}
		if !m.HasEngineUtilization {
			m.EngineUtilization = 0
		}
		req.Candidates = append(req.Candidates, c)
	}
	return req
}

// mutate applies one random edit that often keeps the body almost valid:
// flip a byte to a JSON-significant one, delete or duplicate a span, or
// insert whitespace or an unusual token.
func mutate(r *rand.Rand, b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	const alphabet = "{}[]\":,0123456789-+.eEtfnul \\/\t\xff\xc3\xa9"
	i := r.IntN(len(b))
	switch r.IntN(5) {
	case 0:
		b[i] = alphabet[r.IntN(len(alphabet))]
	case 1:
		j := min(len(b), i+1+r.IntN(8))
		b = append(b[:i], b[j:]...)
	case 2:
		j := min(len(b), i+1+r.IntN(24))
		b = append(b[:j], append(append([]byte{}, b[i:j]...), b[j:]...)...)
	case 3:
		b = append(b[:i], append([]byte(" \n"), b[i:]...)...)
	default:
		tok := []string{`null`, `8e3`, `-0`, `1.0`, `"\u0061"`, `{}`, `[]`, `"x":1,`, `0`, `65536`}[r.IntN(10)]
		b = append(b[:i], append([]byte(tok), b[i:]...)...)
	}
	return b
}

// TestDecodeMatchesTreeRandom checks the property on random valid requests
// (which must all be accepted: they are encoded the way the Gateway
// encodes) and on random mutations of them.
func TestDecodeMatchesTreeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	var mutants, accepted int
	for it := 0; it < iters; it++ {
		body := AppendRequest(nil, randomRequest(r))
		if !checkAgainstTree(t, body) {
			t.Fatalf("valid-by-construction request rejected:\n%s", body)
		}
		for k := 1 + r.IntN(3); k > 0; k-- {
			body = mutate(r, body)
			mutants++
			if checkAgainstTree(t, body) {
				accepted++
			}
		}
	}
	if accepted == 0 || accepted == mutants {
		t.Fatalf("mutations are not exercising both outcomes: %d of %d accepted", accepted, mutants)
	}
}

// FuzzDecodeMatchesTree: DecodeRequest never panics and agrees with
// decodeTree on every body.
func FuzzDecodeMatchesTree(f *testing.F) {
	f.Add(mustJSON(f, baseDoc()))
	f.Add(AppendRequest(nil, benchRequest(10)))
	f.Add([]byte(`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"r"},"spec":{"model":"m","policyMode":"Authoritative","candidates":[{"id":"a/b","ports":[1]}]}}`))
	f.Add([]byte(`{"spec":{"candidates":[{"ports":[8e3,1.0,-0]}]}}`))
	f.Add([]byte(`{"a":"\ud83d\ude00","b":[[[{}]]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstTree(t, body)
	})
}

// TestValidAttributeNameMatchesPattern compares the table-driven check
// with the contract's regular expression on random names.
func TestValidAttributeNameMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./-]{0,127}$`)
	r := rand.New(rand.NewPCG(7, 8))
	names := []string{"", "a", "1a", "a1", "topology.kubernetes.io/zone", "a:b", "é", strings.Repeat("a", 128), strings.Repeat("a", 129)}
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.IntN(12))
		const alphabet = "aZ09_./-:é \x00\xff"
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	for _, n := range names {
		if got, want := ValidAttributeName(n), re.MatchString(n); got != want {
			t.Fatalf("ValidAttributeName(%q) = %v, pattern says %v", n, got, want)
		}
	}
}

// TestRequestSlotReuse decodes a sequence of random (often invalid) bodies
// through one reused slot, as the Handler does, and checks each result
// against decodeTree: equal Request, or the same sentinel.
func TestRequestSlotReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var slot requestSlot
	for it := 0; it < 1000; it++ {
		body := AppendRequest(nil, randomRequest(r))
		if r.IntN(3) == 0 {
			body = mutate(r, body)
		}
		want, wantErr := decodeTree(body)
		got, err := slot.decode(body)
		if (err == nil) != (wantErr == nil) || (err != nil && !errors.Is(err, errors.Unwrap(wantErr))) {
			t.Fatalf("slot err %v, DecodeRequest err %v\n%s", err, wantErr, body)
		}
		if err == nil {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("slot decoded\n%+v\nDecodeRequest\n%+v", got, want)
			}
			checkWindows(t, got)
		}
		slot.release()
		if slot.req.RequestID != "" || (len(slot.cands) > 0 && slot.cands[0].ID != "") {
			t.Fatal("release left strings in the slot")
		}
	}
}

// staticBackend answers every candidate with the same preallocated ranks,
// as a Backend that reuses its buffers does.
type staticBackend struct{ ranks []RankLoad }

func (b staticBackend) CandidateLoad(string, string) ([]RankLoad, bool) { return b.ranks, true }

// TestEvaluateAllocatesNothing pins that Evaluate itself allocates nothing
// per decision (so nothing per candidate) for policies of up to 16 rules
// of a kind; allocations seen in BenchmarkDecodeEvaluate come from its
// Backend stand-in, which builds a new slice per call.
func TestEvaluateAllocatesNothing(t *testing.T) {
	pol := mustPolicy(t, benchPolicy+"sessionKey: sessionId\n")
	req := benchRequest(128)
	var be Backend = staticBackend{ranks: []RankLoad{{Rank: 0, ActiveRequests: 2}, {Rank: 1, ActiveDecodeBlocks: 64}}}
	sticky := &Binding{CandidateID: "ml/qwen2-7b-0127", Port: 8001}
	for _, b := range []*Binding{nil, sticky} {
		if n := testing.AllocsPerRun(100, func() {
			if d := Evaluate(req, pol, be, b); d.Decision != Selected {
				t.Fatal(d)
			}
		}); n != 0 {
			t.Fatalf("Evaluate (sticky=%v) allocates %.1f times per decision", b != nil, n)
		}
	}
}
