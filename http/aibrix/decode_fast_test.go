package aibrix

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The single-pass decoder (decodeFast) is held to the reference decoder
// (decodeTree) by one property: whenever decodeFast accepts a body,
// decodeTree accepts it too and returns an equal Request. These tests
// check the property on hand-picked, random and mutated bodies, and check
// that decodeFast actually accepts ordinary Gateway-shaped requests (a
// fast path that always gave up would satisfy the property vacuously).

// checkFastAgainstTree fails t when decodeFast accepts body and decodeTree
// disagrees. It reports whether decodeFast accepted.
func checkFastAgainstTree(t testing.TB, body []byte) bool {
	t.Helper()
	fast, ok := decodeFast(body)
	if !ok {
		return false
	}
	tree, err := decodeTree(body)
	if err != nil {
		t.Fatalf("decodeFast accepted a body decodeTree rejects (%v):\n%q", err, body)
	}
	if !reflect.DeepEqual(fast, tree) {
		t.Fatalf("decoders disagree on\n%q\nfast: %+v\ntree: %+v", body, fast, tree)
	}
	checkWindows(t, fast)
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

func TestDecodeFastAcceptsGatewayRequests(t *testing.T) {
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
			if !checkFastAgainstTree(t, tt.body) {
				t.Fatalf("decodeFast gave up on an ordinary request:\n%s", tt.body)
			}
		})
	}
}

// TestDecodeFastGivesUp pins bodies the fast path must leave to decodeTree:
// all invalid, or valid but spelled unusually. For valid ones DecodeRequest
// must still succeed through the fallback.
func TestDecodeFastGivesUp(t *testing.T) {
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
			if _, ok := decodeFast([]byte(tt.body)); ok {
				t.Fatalf("decodeFast accepted:\n%s", tt.body)
			}
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

// TestDecodeFastMatchesTreeRandom checks the property on random valid
// requests (which the fast path must all accept: they are encoded the way
// the Gateway encodes) and on random mutations of them.
func TestDecodeFastMatchesTreeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	var mutants, mutantsFast int
	for it := 0; it < iters; it++ {
		req := randomRequest(r)
		body := AppendRequest(nil, req)
		_, treeErr := decodeTree(body)
		fastOK := checkFastAgainstTree(t, body)
		if (treeErr == nil) != fastOK {
			t.Fatalf("valid-by-construction request: tree err %v, fast ok %v\n%s", treeErr, fastOK, body)
		}
		for k := 1 + r.IntN(3); k > 0; k-- {
			body = mutate(r, body)
			mutants++
			if checkFastAgainstTree(t, body) {
				mutantsFast++
			}
		}
	}
	if mutantsFast == 0 || mutantsFast == mutants {
		t.Fatalf("mutations are not exercising both outcomes: %d of %d accepted", mutantsFast, mutants)
	}
}

// FuzzDecodeFastMatchesTree: decodeFast never panics, and every body it
// accepts decodeTree accepts with an equal Request.
func FuzzDecodeFastMatchesTree(f *testing.F) {
	f.Add(mustJSON(f, baseDoc()))
	f.Add(AppendRequest(nil, benchRequest(10)))
	f.Add([]byte(`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"r"},"spec":{"model":"m","policyMode":"Authoritative","candidates":[{"id":"a/b","ports":[1]}]}}`))
	f.Add([]byte(`{"spec":{"candidates":[{"ports":[8e3,1.0,-0]}]}}`))
	f.Add([]byte(`{"a":"\ud83d\ude00","b":[[[{}]]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastAgainstTree(t, body)
	})
}

// TestHasSpecialByteMatchesTable compares the eight-byte check with the
// byte table on every byte value at every position, over random filler.
func TestHasSpecialByteMatchesTable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	naive := func(b []byte) bool {
		for _, c := range b {
			if !plainASCII[c] {
				return true
			}
		}
		return false
	}
	var b [8]byte
	for it := 0; it < 2000; it++ {
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x60)) // printable filler
		}
		if r.IntN(4) == 0 {
			b[r.IntN(8)] = byte(r.IntN(256))
		}
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c += 1 + r.IntN(7) {
				w := b
				w[pos] = byte(c)
				if got, want := hasSpecialByte(binary.LittleEndian.Uint64(w[:])), naive(w[:]); got != want {
					t.Fatalf("hasSpecialByte(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}

// TestExactDecimalMatchesParseFloat checks the short-literal float path
// against strconv.ParseFloat bit for bit.
func TestExactDecimalMatchesParseFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lits := []string{"0", "1", "0.5", "0.1", "0.3", "1.0", "0.123456789012345", "999999999999999", "0.000000000000001", "00.5"}
	for i := 0; i < 20000; i++ {
		digits := 1 + r.IntN(15)
		s := []byte(fmt.Sprint(r.Uint64N(1 << 62)))
		s = s[:min(len(s), digits)]
		if r.IntN(2) == 0 && len(s) > 1 {
			at := 1 + r.IntN(len(s)-1)
			s = append(s[:at], append([]byte{'.'}, s[at:]...)...)
		}
		lits = append(lits, string(s))
	}
	for _, lit := range append(lits, "1e2", "-1", "0.1234567890123456", "1.", ".5", "1.2.3", "") {
		got, ok := exactDecimal([]byte(lit))
		want, err := strconv.ParseFloat(lit, 64)
		if !ok {
			continue
		}
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactDecimal(%q) = %v, ParseFloat = %v, %v", lit, got, want, err)
		}
	}
	if _, ok := exactDecimal([]byte("0.1234567890123456")); ok {
		t.Fatal("16 digits must fall back to ParseFloat")
	}
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
// against DecodeRequest: equal Request, or the identical error.
func TestRequestSlotReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var slot requestSlot
	for it := 0; it < 1000; it++ {
		body := AppendRequest(nil, randomRequest(r))
		if r.IntN(3) == 0 {
			body = mutate(r, body)
		}
		want, wantErr := DecodeRequest(body)
		got, err := slot.decode(body)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
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
