package aibrix

// The reference decoder the production decoder (decode.go) is held to: the
// former tree decoder, which parses the body into a strict tree (oracle_parse_test.go)
// and validates it member by member. It is test-only now; the differential
// tests (decode_diff_test.go) and FuzzDecodeMatchesTree require both decoders
// to agree on every body: the same verdict, sentinel, Field and Request.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeTree is the reference decoder: it parses body into a tree with the
// test-only strict parser (sjParse, oracle_parse_test.go) and validates it
// member by member. It is the independent oracle the differential tests
// hold DecodeRequest's jsontext walk to.
func decodeTree(body []byte) (*Request, error) {
	doc, err := sjParse(body)
	if err != nil {
		return nil, treeSyntaxProblem(err)
	}
	defer doc.Release() // the Request keeps only strings, which stay valid
	root := doc.Root()
	if root.Kind() != sjObject {
		return nil, invalid("", titleType, "the document must be a JSON object, got %s", root.Kind())
	}
	var (
		req                   Request
		haveAPI, haveKind     bool
		metadata, spec        sjValue
		haveMetadata, hasSpec bool
	)
	for m := root.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "apiVersion":
			s, err := treeRequiredString("apiVersion", m)
			if err != nil {
				return nil, err
			}
			if s != APIVersion {
				return nil, invalid("apiVersion", titleValue, "must be %q, got %q", APIVersion, s)
			}
			haveAPI = true
		case "kind":
			s, err := treeRequiredString("kind", m)
			if err != nil {
				return nil, err
			}
			if s != KindRequest {
				return nil, invalid("kind", titleValue, "must be %q, got %q", KindRequest, s)
			}
			haveKind = true
		case "metadata":
			metadata, haveMetadata = m, true
		case "spec":
			spec, hasSpec = m, true
		}
	}
	switch {
	case !haveAPI:
		return nil, invalid("apiVersion", titleMissing, "apiVersion is required")
	case !haveKind:
		return nil, invalid("kind", titleMissing, "kind is required")
	case !haveMetadata:
		return nil, invalid("metadata", titleMissing, "metadata is required")
	case !hasSpec:
		return nil, invalid("spec", titleMissing, "spec is required")
	}
	if err := treeMetadata(metadata, &req); err != nil {
		return nil, err
	}
	if err := treeSpec(spec, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// treeSyntaxProblem maps an sjParse error onto the package sentinels. The
// Field of a duplicate member is the path of the repeated member itself,
// so a client sees "spec.candidates[0].id" rather than the enclosing object.
func treeSyntaxProblem(err error) *RequestError {
	var se *sjSyntaxError
	if !errors.As(err, &se) {
		return &RequestError{Title: "Malformed JSON", Detail: err.Error(), err: ErrMalformedJSON}
	}
	re := &RequestError{Field: se.Path}
	switch {
	case errors.Is(err, sjErrEmpty):
		re.Title, re.err = "Empty body", ErrEmptyBody
		re.Detail = "the request body must hold one JSON object"
	case errors.Is(err, sjErrDuplicateMember):
		re.Title, re.err = "Duplicate JSON member", ErrDuplicateMember
		re.Detail = fmt.Sprintf("member %q appears more than once in the same object (byte %d)", se.Name, se.Offset)
		re.Field = sjRender(append(se.segs[:len(se.segs):len(se.segs)], sjSeg{s: se.Name}))
	case errors.Is(err, sjErrTrailingData):
		re.Title, re.err = "Trailing data", ErrTrailingData
		re.Detail = fmt.Sprintf("only one JSON value is allowed; found more input at byte %d", se.Offset)
	default:
		re.Title, re.err = "Malformed JSON", ErrMalformedJSON
		re.Detail = fmt.Sprintf("%s at byte %d", se.Msg, se.Offset)
	}
	return re
}

// treeRequiredString checks a required string member (null counts as missing).
func treeRequiredString(field string, v sjValue) (string, error) {
	switch v.Kind() {
	case sjString:
		return v.Str(), nil
	case sjNull:
		return "", invalid(field, titleMissing, "%s is required and must not be null", field)
	default:
		return "", invalid(field, titleType, "must be a string, got %s", v.Kind())
	}
}

// treeRequiredObject checks a required object member (null counts as missing).
func treeRequiredObject(field string, v sjValue) error {
	switch v.Kind() {
	case sjObject:
		return nil
	case sjNull:
		return invalid(field, titleMissing, "%s is required and must not be null", field)
	default:
		return invalid(field, titleType, "must be an object, got %s", v.Kind())
	}
}

// treeOptionalKind checks an optional member: present members must have kind k;
// null is rejected because the contract says optional members are omitted.
func treeOptionalKind(field string, v sjValue, k sjKind) error {
	switch v.Kind() {
	case k:
		return nil
	case sjNull:
		return invalid(field, titleNull, "optional members must be omitted instead of null")
	default:
		return invalid(field, titleType, "must be a%s %s, got %s", treeArticle(k), k, v.Kind())
	}
}

func treeArticle(k sjKind) string {
	if k == sjObject || k == sjArray {
		return "n"
	}
	return ""
}

// treeMetadata validates metadata: a required object whose requestId is
// a required string of 1..MaxIDBytes bytes. UTF-8 validity is guaranteed by
// the parser. Unknown members (including a decisionId, which only responses
// carry) are ignored.
func treeMetadata(v sjValue, req *Request) error {
	if err := treeRequiredObject("metadata", v); err != nil {
		return err
	}
	id, ok := v.Get("requestId")
	if !ok {
		return invalid("metadata.requestId", titleMissing, "metadata.requestId is required")
	}
	s, err := treeRequiredString("metadata.requestId", id)
	if err != nil {
		return err
	}
	if s == "" || len(s) > MaxIDBytes {
		return invalid("metadata.requestId", titleValue, "must be 1..%d UTF-8 bytes, got %d", MaxIDBytes, len(s))
	}
	req.RequestID = s
	return nil
}

// treeSpec validates spec: model (non-empty string), policyMode (exact
// enum), the optional policyContext.attributes, and candidates. The model
// is used verbatim: kvselect neither normalises nor changes it.
func treeSpec(v sjValue, req *Request) error {
	if err := treeRequiredObject("spec", v); err != nil {
		return err
	}
	var haveModel, haveMode, haveCandidates bool
	for m := v.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "model":
			s, err := treeRequiredString("spec.model", m)
			if err != nil {
				return err
			}
			if s == "" {
				return invalid("spec.model", titleValue, "must be a non-empty string")
			}
			req.Model, haveModel = s, true
		case "policyMode":
			s, err := treeRequiredString("spec.policyMode", m)
			if err != nil {
				return err
			}
			if s != string(Advisory) && s != string(Authoritative) {
				return invalid("spec.policyMode", titleValue, "must be %q or %q, got %q", Advisory, Authoritative, s)
			}
			req.PolicyMode, haveMode = PolicyMode(s), true
		case "policyContext":
			if err := treeOptionalKind("spec.policyContext", m, sjObject); err != nil {
				return err
			}
			if a, ok := m.Get("attributes"); ok {
				attrs, err := treeAttributes("spec.policyContext.attributes", a)
				if err != nil {
					return err
				}
				req.PolicyContext = attrs
			}
		case "candidates":
			if err := treeCandidates(m, req); err != nil {
				return err
			}
			haveCandidates = true
		}
	}
	switch {
	case !haveModel:
		return invalid("spec.model", titleMissing, "spec.model is required")
	case !haveMode:
		return invalid("spec.policyMode", titleMissing, "spec.policyMode is required")
	case !haveCandidates:
		return invalid("spec.candidates", titleMissing, "spec.candidates is required")
	}
	return nil
}

// treeCandidates decodes the candidates array into req.Candidates and
// enforces id uniqueness across candidates.
func treeCandidates(v sjValue, req *Request) error {
	switch v.Kind() {
	case sjArray:
	case sjNull:
		return invalid("spec.candidates", titleMissing, "spec.candidates is required and must not be null")
	default:
		return invalid("spec.candidates", titleType, "must be an array, got %s", v.Kind())
	}
	if v.Len() == 0 {
		return invalid("spec.candidates", titleValue, "must contain at least one candidate")
	}
	req.Candidates = make([]Candidate, 0, v.Len())
	// Ports and attributes of all candidates live in two shared arenas:
	// each candidate gets a full-capacity-limited window, and a later
	// reallocation of an treeArena leaves earlier windows on the old array,
	// which stays valid. This keeps allocations independent of n.
	ar := &treeArena{ports: make([]int, 0, 2*v.Len()), attrs: make(Attributes, 0, 2*v.Len())}
	// Small snapshots check uniqueness by scanning; larger ones use a map so
	// hostile inputs stay O(n).
	var seen map[string]int
	if v.Len() > 8 {
		seen = make(map[string]int, v.Len())
	}
	i := 0
	for e := v.First(); e.Valid(); e = e.Next() {
		c, err := treeCandidate(e, ar)
		if err != nil {
			return treePrefixed(err, "spec.candidates["+strconv.Itoa(i)+"]")
		}
		dup := -1
		if seen != nil {
			if j, ok := seen[c.ID]; ok {
				dup = j
			} else {
				seen[c.ID] = i
			}
		} else {
			for j := range req.Candidates {
				if req.Candidates[j].ID == c.ID {
					dup = j
				}
			}
		}
		if dup >= 0 {
			return invalid("spec.candidates["+strconv.Itoa(i)+"].id", titleDuplicate, "candidate id %q repeats spec.candidates[%d]", c.ID, dup)
		}
		req.Candidates = append(req.Candidates, c)
		i++
	}
	return nil
}

// treeArena holds the shared backing arrays of one request's candidates.
type treeArena struct {
	ports []int
	attrs Attributes
}

// treePrefixed prepends prefix to the Field of a *RequestError whose Field is
// relative, so paths are only built when a request is rejected.
func treePrefixed(err error, prefix string) error {
	var re *RequestError
	if errors.As(err, &re) {
		switch {
		case re.Field == "":
			re.Field = prefix
		case strings.HasPrefix(re.Field, "["):
			re.Field = prefix + re.Field
		default:
			re.Field = prefix + "." + re.Field
		}
	}
	return err
}

// treeCandidate decodes one candidate; error fields are relative to it.
func treeCandidate(v sjValue, ar *treeArena) (Candidate, error) {
	var c Candidate
	if v.Kind() != sjObject {
		return c, invalid("", titleType, "each candidate must be an object, got %s", v.Kind())
	}
	var haveID, havePorts bool
	for m := v.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "id":
			s, err := treeRequiredString("id", m)
			if err != nil {
				return c, err
			}
			if err := treeCheckCandidateID("id", s); err != nil {
				return c, err
			}
			c.ID, haveID = s, true
		case "ports":
			ports, err := treePorts("ports", m, &ar.ports)
			if err != nil {
				return c, err
			}
			c.Ports, havePorts = ports, true
		case "attributes":
			a, err := treeAttributesInto("attributes", m, &ar.attrs)
			if err != nil {
				return c, err
			}
			c.Attributes = a
		case "metrics":
			if err := treeMetrics(m, &c.Metrics); err != nil {
				return c, treePrefixed(err, "metrics")
			}
		}
	}
	switch {
	case !haveID:
		return c, invalid("id", titleMissing, "candidate id is required")
	case !havePorts:
		return c, invalid("ports", titleMissing, "candidate ports are required")
	}
	return c, nil
}

// treeCheckCandidateID enforces `^[^/]+/[^/]+$` and the 256-byte bound. The
// byte bound is the Gateway's (it refuses longer ids before sending); the
// schema's maxLength counts characters, so bytes is the stricter reading
// and every id the Gateway can send passes.
// The rule itself is validCandidateID's, shared with the fast decoder; this
// only explains a rejection.
func treeCheckCandidateID(field, s string) error {
	switch {
	case validCandidateID(s):
		return nil
	case len(s) > MaxIDBytes:
		return invalid(field, titleValue, "must be at most %d bytes, got %d", MaxIDBytes, len(s))
	default:
		return invalid(field, titleValue, "must be namespace/pod-name with exactly one '/', got %q", s)
	}
}

// treePorts appends the ports to *ar and returns the window holding them.
func treePorts(field string, v sjValue, ar *[]int) ([]int, error) {
	switch v.Kind() {
	case sjArray:
	case sjNull:
		return nil, invalid(field, titleMissing, "ports are required and must not be null")
	default:
		return nil, invalid(field, titleType, "must be an array, got %s", v.Kind())
	}
	if v.Len() == 0 {
		return nil, invalid(field, titleValue, "must list at least one port")
	}
	start := len(*ar)
	i := 0
	for e := v.First(); e.Valid(); e = e.Next() {
		pf := field // made precise only on error
		if e.Kind() != sjNumber {
			pf = field + "[" + strconv.Itoa(i) + "]"
			return nil, invalid(pf, titleType, "must be an integer, got %s", e.Kind())
		}
		x, ok := e.Integral()
		if !ok {
			pf = field + "[" + strconv.Itoa(i) + "]"
			return nil, invalid(pf, titleType, "must be an integer, got %s", e.Literal())
		}
		if x < 1 || x > 65535 {
			pf = field + "[" + strconv.Itoa(i) + "]"
			return nil, invalid(pf, titleValue, "port %d is outside 1..65535", x)
		}
		*ar = append(*ar, int(x))
		i++
	}
	ports := (*ar)[start:len(*ar):len(*ar)]
	slices.Sort(ports)
	for j := 1; j < len(ports); j++ {
		if ports[j] == ports[j-1] {
			return nil, invalid(field, titleDuplicate, "port %d is listed more than once", ports[j])
		}
	}
	return ports, nil
}

// treeAttributes decodes an attributes object into its own slice.
func treeAttributes(field string, v sjValue) (Attributes, error) {
	var own Attributes
	return treeAttributesInto(field, v, &own)
}

// treeAttributesInto appends to *ar and returns the window it used.
func treeAttributesInto(field string, v sjValue, ar *Attributes) (Attributes, error) {
	if err := treeOptionalKind(field, v, sjObject); err != nil {
		return nil, err
	}
	if v.Len() > MaxAttributes {
		return nil, invalid(field, titleValue, "at most %d attributes are allowed, got %d", MaxAttributes, v.Len())
	}
	if v.Len() == 0 {
		return Attributes{}, nil
	}
	start := len(*ar)
	for m := v.First(); m.Valid(); m = m.Next() {
		name := m.Key()
		if !ValidAttributeName(name) {
			return nil, invalid(field, titleValue, "attribute name %q must match ^[A-Za-z][A-Za-z0-9_./-]{0,127}$", name)
		}
		if m.Kind() != sjString {
			return nil, invalid(field+"."+name, titleType, "attribute values must be strings, got %s", m.Kind())
		}
		if n := len(m.Str()); n > MaxAttributeValueLen && utf8.RuneCountInString(m.Str()) > MaxAttributeValueLen {
			return nil, invalid(field+"."+name, titleValue, "attribute value must be at most %d characters, got %d",
				MaxAttributeValueLen, utf8.RuneCountInString(m.Str()))
		}
		*ar = append(*ar, Attribute{Name: name, Value: m.Str()})
	}
	return (*ar)[start:len(*ar):len(*ar)], nil
}

// treeMetrics decodes a metrics object; error fields are relative to it.
//
// The Gateway omits unavailable, non-finite, negative or above-one values
// itself, so an out-of-range value here means a non-Gateway client or a
// Gateway bug; it is rejected rather than clamped so the problem is seen.
func treeMetrics(v sjValue, out *Metrics) error {
	if err := treeOptionalKind("", v, sjObject); err != nil {
		return err
	}
	for m := v.First(); m.Valid(); m = m.Next() {
		mf := m.Key() // relative; the caller prefixes the path on error
		switch m.Key() {
		case "runningRequests":
			if err := treeOptionalKind(mf, m, sjNumber); err != nil {
				return err
			}
			x, ok := m.Integral()
			if !ok {
				return invalid(mf, titleType, "must be an integer, got %s", m.Literal())
			}
			if x < 0 {
				return invalid(mf, titleValue, "must be >= 0, got %d", x)
			}
			out.RunningRequests, out.HasRunningRequests = x, true
		case "engineUtilization", "kvCacheUsage":
			if err := treeOptionalKind(mf, m, sjNumber); err != nil {
				return err
			}
			f, ok := m.Float()
			if !ok || f < 0 || f > 1 {
				return invalid(mf, titleValue, "must be a ratio in [0,1], got %s", m.Literal())
			}
			if m.Key() == "kvCacheUsage" {
				out.KVCacheUsage, out.HasKVCacheUsage = f, true
			} else {
				out.EngineUtilization, out.HasEngineUtilization = f, true
			}
		}
	}
	return nil
}
