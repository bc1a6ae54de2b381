package aibrix

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file is the schema half of the single-pass decoder: it walks the
// request once, straight from the body into pooled scratch, and builds the
// Request in a fixed number of allocations (the body's string copy, the
// Request, and one array each for candidates, ports and attributes),
// independent of the number of candidates.
//
// Contract with DecodeRequest (checked by the differential tests and
// FuzzDecodeFastMatchesTree): whenever decodeFast returns ok, decodeTree
// accepts the same body and returns an equal Request. decodeFast may give
// up on any body; it does for every invalid one and for valid ones it does
// not bother with (escaped member names, integers spelled 8e3 or 8000.0,
// objects of more than 32 members, nesting beyond 48 levels), and
// DecodeRequest then falls back to decodeTree. Errors are therefore
// produced by decodeTree alone, byte for byte as before.

// fastCandidate is a decoded candidate whose ports and attributes are
// still windows into the decoder's scratch: ports f.ports[p0:p1],
// attributes f.attrs[a0:a1] (a0 < 0 when the member was absent).
type fastCandidate struct {
	id      string
	p0, p1  int32
	a0, a1  int32
	metrics Metrics
}

// fastPool recycles decoders (their scratch) between requests.
var fastPool = sync.Pool{New: func() any { return new(fastDecoder) }}

// Scratch larger than this is dropped rather than pooled, so one huge
// request cannot pin memory for the life of the process.
const fastMaxPooled = 4096

// decodeFast decodes a valid, ordinarily spelled request in one pass; ok
// is false when it gave up (see the file comment). It never panics.
func decodeFast(body []byte) (*Request, bool) {
	out := new(Request)
	if !decodeFastInto(body, out, nil) {
		return nil, false
	}
	return out, true
}

// decodeFastInto is decodeFast writing into out, reusing st's arrays when st
// is not nil; out is untouched when it gives up.
func decodeFastInto(body []byte, out *Request, st *requestSlot) bool {
	f := fastPool.Get().(*fastDecoder)
	var req Request
	var ctx [2]int32
	ok := f.parse(body, &req, &ctx)
	if ok {
		f.buildInto(out, &req, ctx, st)
	}
	f.release()
	fastPool.Put(f)
	return ok
}

// release drops every reference to the body so the pooled decoder pins
// nothing, and sheds oversized scratch.
func (f *fastDecoder) release() {
	f.d, f.s = nil, ""
	clear(f.keys[:cap(f.keys)])
	clear(f.cands)
	clear(f.attrs)
	clear(f.ids)
	if cap(f.cands) > fastMaxPooled || cap(f.ports) > 4*fastMaxPooled || cap(f.attrs) > 4*fastMaxPooled {
		f.cands, f.ports, f.attrs, f.ids = nil, nil, nil, nil
	}
}

// decode parses body and builds a new Request.

// parse reads the root object (apiVersion, kind, metadata, spec, unknown
// members, then nothing but whitespace) into the scratch: req receives the
// envelope fields, *ctx the window of policyContext.attributes ({-1,-1}
// when absent), f.cands the candidates.
func (f *fastDecoder) parse(body []byte, req *Request, ctx *[2]int32) bool {
	f.d, f.s, f.pos, f.depth = body, string(body), 0, 0
	f.keys, f.cands, f.ports, f.attrs = f.keys[:0], f.cands[:0], f.ports[:0], f.attrs[:0]
	*ctx = [2]int32{-1, -1}
	var haveAPI, haveKind, haveMeta, haveSpec bool
	if f.peek() != '{' || !f.open() {
		return false
	}
	for first := true; ; first = false {
		key, more, ok := f.member(0, first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		switch key {
		case "apiVersion":
			s, ok := f.strValue()
			if !ok || s != APIVersion {
				return false
			}
			haveAPI = true
		case "kind":
			s, ok := f.strValue()
			if !ok || s != KindRequest {
				return false
			}
			haveKind = true
		case "metadata":
			if !f.metadata(req) {
				return false
			}
			haveMeta = true
		case "spec":
			if !f.spec(req, ctx) {
				return false
			}
			haveSpec = true
		default:
			if !f.skip() {
				return false
			}
		}
	}
	f.ws()
	if f.pos != len(f.d) || !haveAPI || !haveKind || !haveMeta || !haveSpec {
		return false
	}
	return true
}

// strValue reads a value that must be a string.
func (f *fastDecoder) strValue() (string, bool) {
	if f.peek() != '"' {
		return "", false
	}
	return f.str()
}

// metadata reads the metadata object: requestId of 1..MaxIDBytes bytes.
func (f *fastDecoder) metadata(req *Request) bool {
	if f.peek() != '{' || !f.open() {
		return false
	}
	base := len(f.keys)
	haveID := false
	for first := true; ; first = false {
		key, more, ok := f.member(base, first)
		if !ok {
			return false
		}
		if !more {
			return haveID
		}
		if key != "requestId" {
			if !f.skip() {
				return false
			}
			continue
		}
		s, ok := f.strValue()
		if !ok || s == "" || len(s) > MaxIDBytes {
			return false
		}
		req.RequestID, haveID = s, true
	}
}

// spec reads the spec object; *ctx receives the window of
// policyContext.attributes when present.
func (f *fastDecoder) spec(req *Request, ctx *[2]int32) bool {
	if f.peek() != '{' || !f.open() {
		return false
	}
	base := len(f.keys)
	var haveModel, haveMode, haveCandidates bool
	for first := true; ; first = false {
		key, more, ok := f.member(base, first)
		if !ok {
			return false
		}
		if !more {
			return haveModel && haveMode && haveCandidates
		}
		switch key {
		case "model":
			s, ok := f.strValue()
			if !ok || s == "" {
				return false
			}
			req.Model, haveModel = s, true
		case "policyMode":
			s, ok := f.strValue()
			switch {
			case !ok:
				return false
			case s == string(Advisory):
				req.PolicyMode = Advisory
			case s == string(Authoritative):
				req.PolicyMode = Authoritative
			default:
				return false
			}
			haveMode = true
		case "policyContext":
			if !f.policyContext(ctx) {
				return false
			}
		case "candidates":
			if !f.candidates() {
				return false
			}
			haveCandidates = true
		default:
			if !f.skip() {
				return false
			}
		}
	}
}

// policyContext reads spec.policyContext; only attributes is kept.
func (f *fastDecoder) policyContext(ctx *[2]int32) bool {
	if f.peek() != '{' || !f.open() {
		return false
	}
	base := len(f.keys)
	for first := true; ; first = false {
		key, more, ok := f.member(base, first)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		if key != "attributes" {
			if !f.skip() {
				return false
			}
			continue
		}
		a0, a1, ok := f.attributes()
		if !ok {
			return false
		}
		ctx[0], ctx[1] = a0, a1
	}
}

// attributes reads an attributes object into f.attrs and returns its
// window. The member limit of the scanner equals MaxAttributes, so a 33rd
// member gives up there.
func (f *fastDecoder) attributes() (a0, a1 int32, ok bool) {
	if f.peek() != '{' || !f.open() {
		return 0, 0, false
	}
	base := len(f.keys)
	a0 = int32(len(f.attrs))
	for first := true; ; first = false {
		name, more, ok := f.member(base, first)
		if !ok {
			return 0, 0, false
		}
		if !more {
			return a0, int32(len(f.attrs)), true
		}
		if !ValidAttributeName(name) {
			return 0, 0, false
		}
		v, ok := f.strValue()
		if !ok || len(v) > MaxAttributeValueLen && utf8.RuneCountInString(v) > MaxAttributeValueLen {
			return 0, 0, false
		}
		f.attrs = append(f.attrs, Attribute{Name: name, Value: v})
	}
}

// candidates reads the non-empty candidates array and checks id
// uniqueness (a duplicate gives up; decodeTree names both positions).
func (f *fastDecoder) candidates() bool {
	if f.peek() != '[' || !f.open() {
		return false
	}
	for first := true; ; first = false {
		more, ok := f.elem(first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		if !f.candidate() {
			return false
		}
	}
	n := len(f.cands)
	if n == 0 {
		return false
	}
	if n <= 8 {
		for i := 1; i < n; i++ {
			for j := 0; j < i; j++ {
				if f.cands[i].id == f.cands[j].id {
					return false
				}
			}
		}
		return true
	}
	if f.ids == nil {
		f.ids = make(map[string]int32, n)
	}
	for i := range f.cands {
		if _, dup := f.ids[f.cands[i].id]; dup {
			return false
		}
		f.ids[f.cands[i].id] = int32(i)
	}
	return true
}

// candidateKeys and metricsKeys are the member names knownMember matches
// in candidate and metrics objects; the switch cases below use the indices.
var (
	candidateKeys = []string{"id", "ports", "attributes", "metrics"}
	metricsKeys   = []string{"runningRequests", "engineUtilization", "kvCacheUsage"}
)

// candidate reads one candidate object and appends it to f.cands.
func (f *fastDecoder) candidate() bool {
	if f.peek() != '{' || !f.open() {
		return false
	}
	base := len(f.keys)
	c := fastCandidate{a0: -1}
	var seen uint32
	for first := true; ; first = false {
		idx, more, ok := f.knownMember(base, first, candidateKeys, &seen)
		if !ok {
			return false
		}
		if !more {
			break
		}
		switch idx {
		case 0: // id
			s, ok := f.strValue()
			if !ok || !validCandidateID(s) {
				return false
			}
			c.id = s
		case 1: // ports
			if c.p0, c.p1, ok = f.portList(); !ok {
				return false
			}
		case 2: // attributes
			if c.a0, c.a1, ok = f.attributes(); !ok {
				return false
			}
		case 3: // metrics
			if !f.metrics(&c.metrics) {
				return false
			}
		default:
			if !f.skip() {
				return false
			}
		}
	}
	if seen&3 != 3 { // id and ports are required
		return false
	}
	f.cands = append(f.cands, c)
	return true
}

// validCandidateID is the candidate id rule both decoders apply: at most
// MaxIDBytes bytes with exactly one '/', text on both sides.
func validCandidateID(s string) bool {
	slash := strings.IndexByte(s, '/')
	return len(s) <= MaxIDBytes && slash > 0 && slash < len(s)-1 && strings.IndexByte(s[slash+1:], '/') < 0
}

// portList reads a non-empty array of plain-integer ports in 1..65535 into
// f.ports, sorts the window and rejects duplicates.
func (f *fastDecoder) portList() (p0, p1 int32, ok bool) {
	if f.peek() != '[' || !f.open() {
		return 0, 0, false
	}
	p0 = int32(len(f.ports))
	for first := true; ; first = false {
		more, ok := f.elem(first)
		if !ok {
			return 0, 0, false
		}
		if !more {
			break
		}
		x, ok := f.uint(5)
		if !ok || x < 1 || x > 65535 {
			return 0, 0, false
		}
		f.ports = append(f.ports, int(x))
	}
	p1 = int32(len(f.ports))
	w := f.ports[p0:p1]
	if len(w) == 0 {
		return 0, 0, false
	}
	if len(w) > 1 {
		slices.Sort(w)
		for j := 1; j < len(w); j++ {
			if w[j] == w[j-1] {
				return 0, 0, false
			}
		}
	}
	return p0, p1, true
}

// metrics reads a metrics object. runningRequests must be plain digits
// (at most 15, well inside the ±2^53 the reference allows); the ratios are
// parsed exactly as the reference parses them.
func (f *fastDecoder) metrics(m *Metrics) bool {
	if f.peek() != '{' || !f.open() {
		return false
	}
	base := len(f.keys)
	var seen uint32
	for first := true; ; first = false {
		idx, more, ok := f.knownMember(base, first, metricsKeys, &seen)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		switch idx {
		case 0: // runningRequests
			if m.RunningRequests, ok = f.uint(15); !ok {
				return false
			}
			m.HasRunningRequests = true
		case 1: // engineUtilization
			if m.EngineUtilization, ok = f.ratio(); !ok {
				return false
			}
			m.HasEngineUtilization = true
		case 2: // kvCacheUsage
			if m.KVCacheUsage, ok = f.ratio(); !ok {
				return false
			}
			m.HasKVCacheUsage = true
		default:
			if !f.skip() {
				return false
			}
		}
	}
}

// ratio reads a number in [0,1]. strconv.ParseFloat reports overflow as
// an error, so ±Inf never passes; exactDecimal handles the common short
// literals with the same, correctly rounded, result.
func (f *fastDecoder) ratio() (float64, bool) {
	f.ws()
	start, end, ok := f.number()
	if !ok {
		return 0, false
	}
	x, ok := exactDecimal(f.d[start:end])
	if !ok {
		var err error
		if x, err = strconv.ParseFloat(f.s[start:end], 64); err != nil {
			return 0, false
		}
	}
	if x < 0 || x > 1 {
		return 0, false
	}
	return x, true
}

// buildInto turns the scratch into out: one array for candidates, one for
// ports, one for attributes, each candidate holding full-capacity-limited
// windows (len == cap) so appending to one can never overwrite another's.
// With st non-nil (a handler's pooled Request; see requestSlot) the arrays
// of st are reused; otherwise they are new.
func (f *fastDecoder) buildInto(out *Request, req *Request, ctx [2]int32, st *requestSlot) {
	var ports []int
	var attrs Attributes
	var cands []Candidate
	if st != nil {
		ports = append(st.ports[:0], f.ports...)
		attrs = append(st.attrs[:0], f.attrs...)
		cands = slices.Grow(st.cands[:0], len(f.cands))[:len(f.cands)]
		st.ports, st.attrs, st.cands = ports, attrs, cands
	} else {
		ports = slices.Clone(f.ports)
		attrs = slices.Clone(f.attrs)
		cands = make([]Candidate, len(f.cands))
	}
	window := func(a0, a1 int32) Attributes {
		switch {
		case a0 < 0:
			return nil
		case a0 == a1:
			return Attributes{} // present but empty, as decodeTree returns it
		}
		return attrs[a0:a1:a1]
	}
	*out = Request{RequestID: req.RequestID, Model: req.Model, PolicyMode: req.PolicyMode,
		PolicyContext: window(ctx[0], ctx[1]), Candidates: cands}
	for i := range f.cands {
		fc := &f.cands[i]
		cands[i] = Candidate{ID: fc.id, Ports: ports[fc.p0:fc.p1:fc.p1],
			Attributes: window(fc.a0, fc.a1), Metrics: fc.metrics}
	}
}

// requestSlot is a Request whose arrays a Handler reuses from one exchange
// to the next (requests are garbage as soon as the answer is written, and
// their arrays are most of what decoding allocates). Owned by one
// exchange at a time; release clears every string so a pooled slot pins
// no body.
type requestSlot struct {
	req   Request
	cands []Candidate
	ports []int
	attrs Attributes
}

// decode decodes body into the slot when the single-pass decoder accepts
// it, and otherwise returns DecodeRequest's fresh Request or error. The
// result is valid until release.
func (st *requestSlot) decode(body []byte) (*Request, error) {
	if decodeFastInto(body, &st.req, st) {
		return &st.req, nil
	}
	return decodeTree(body)
}

// release forgets the last request's strings; oversized arrays are
// dropped so one huge request cannot pin memory in the pool.
func (st *requestSlot) release() {
	clear(st.cands)
	clear(st.attrs)
	st.req = Request{}
	if cap(st.cands) > fastMaxPooled || cap(st.attrs) > 4*fastMaxPooled || cap(st.ports) > 4*fastMaxPooled {
		*st = requestSlot{}
	}
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// exactDecimal converts a literal of the form digits[.digits] with at most
// 15 digits in all. The mantissa (< 10^15 < 2^53) and 10^k (k ≤ 15) are
// exact float64 values and IEEE division rounds correctly, so the result
// is the correctly rounded value, identical to strconv.ParseFloat's (the
// fast path of Clinger's algorithm). Other literals report ok=false.
func exactDecimal(lit []byte) (float64, bool) {
	var m uint64
	digits, frac, dot := 0, 0, false
	for _, c := range lit {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if digits == 0 || digits > 15 {
		return 0, false
	}
	return float64(m) / pow10[frac], true
}
