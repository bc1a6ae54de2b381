package aibrix

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file decodes spec and its candidates. Invariants established for
// every decoded candidate (relied on by Evaluate and the encoders):
//
//   - ID is unique within the request and has exactly one '/' with
//     non-empty text on both sides, at most MaxIDBytes bytes;
//   - Ports is non-empty, sorted ascending, duplicate-free, within 1..65535,
//     and a window (len == cap) of an array shared by the whole request, so
//     appending to it can never overwrite another candidate's ports;
//   - Attributes has unique, pattern-valid names and string values within
//     the length bound (uniqueness comes from jsontext's duplicate check);
//   - Metrics flags are set only for members present with in-range values.
//
// Error fields are built relative to the candidate and prefixed by the
// caller only when a request is rejected, so valid requests pay nothing
// for precise error paths.

// spec validates spec: model (non-empty string), policyMode (exact enum),
// the optional policyContext.attributes, and candidates. The model is used
// verbatim: kvselect neither normalises nor changes it.
func (r *reader) spec(st *requestSlot) error {
	if err := r.requiredObject("spec"); err != nil {
		return err
	}
	req := &st.req
	var haveModel, haveMode, haveCandidates bool
	for r.more() {
		name, err := r.name()
		if err != nil {
			return err
		}
		switch string(name) {
		case "model":
			s, err := r.requiredString("spec.model")
			if err != nil {
				return err
			}
			if s == "" {
				return invalid("spec.model", titleValue, "must be a non-empty string")
			}
			req.Model, haveModel = s, true
		case "policyMode":
			s, err := r.requiredString("spec.policyMode")
			if err != nil {
				return err
			}
			if s != string(Advisory) && s != string(Authoritative) {
				return invalid("spec.policyMode", titleValue, "must be %q or %q, got %q", Advisory, Authoritative, s)
			}
			req.PolicyMode, haveMode = PolicyMode(s), true
		case "policyContext":
			if err := r.policyContext(st); err != nil {
				return err
			}
		case "candidates":
			if err := r.candidates(st); err != nil {
				return err
			}
			haveCandidates = true
		default:
			if err := r.skip(); err != nil {
				return err
			}
		}
	}
	if err := r.token(); err != nil {
		return err
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

// policyContext decodes the optional policyContext object; only its
// attributes member is read.
func (r *reader) policyContext(st *requestSlot) error {
	if err := r.optional("spec.policyContext", '{'); err != nil {
		return err
	}
	for r.more() {
		name, err := r.name()
		if err != nil {
			return err
		}
		if string(name) != "attributes" {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if st.req.PolicyContext, err = r.attributes("spec.policyContext.attributes", &st.attrs); err != nil {
			return err
		}
	}
	return r.token()
}

// candidates decodes the candidates array into st.req.Candidates and
// enforces id uniqueness across candidates.
func (r *reader) candidates(st *requestSlot) error {
	k, err := r.peek()
	switch {
	case err != nil:
		return err
	case k == 'n':
		return invalid("spec.candidates", titleMissing, "spec.candidates is required and must not be null")
	case k != '[':
		return invalid("spec.candidates", titleType, "must be an array, got %s", kindName(k))
	}
	if err := r.token(); err != nil {
		return err
	}
	if !r.more() {
		if _, err := r.peek(); err != nil {
			return err
		}
		return invalid("spec.candidates", titleValue, "must contain at least one candidate")
	}
	for i := 0; r.more(); i++ {
		c, err := r.candidate(st)
		if err != nil {
			return prefixed(err, "spec.candidates["+strconv.Itoa(i)+"]")
		}
		if j, dup := st.sawID(c.ID, i); dup {
			return invalid("spec.candidates["+strconv.Itoa(i)+"].id", titleDuplicate, "candidate id %q repeats spec.candidates[%d]", c.ID, j)
		}
		st.cands = append(st.cands, c)
	}
	st.req.Candidates = st.cands
	return r.token()
}

// sawID records candidate i's id and reports an earlier candidate with the
// same id. Small snapshots check by scanning; larger ones use a map so
// hostile inputs stay O(n).
func (st *requestSlot) sawID(id string, i int) (int, bool) {
	if i < 8 {
		for j := range st.cands {
			if st.cands[j].ID == id {
				return j, true
			}
		}
		return 0, false
	}
	if st.seen == nil {
		st.seen = make(map[string]int)
	}
	if len(st.seen) == 0 {
		for j := range st.cands {
			st.seen[st.cands[j].ID] = j
		}
	}
	if j, ok := st.seen[id]; ok {
		return j, true
	}
	st.seen[id] = i
	return 0, false
}

// prefixed prepends prefix to the Field of a *RequestError whose Field is
// relative, so paths are only built when a request is rejected.
func prefixed(err error, prefix string) error {
	var re *RequestError
	if errors.As(err, &re) && errors.Is(err, ErrInvalidRequest) {
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

// candidate decodes one candidate; error fields are relative to it.
func (r *reader) candidate(st *requestSlot) (Candidate, error) {
	var c Candidate
	k, err := r.peek()
	if err != nil {
		return c, err
	}
	if k != '{' {
		return c, invalid("", titleType, "each candidate must be an object, got %s", kindName(k))
	}
	if err := r.token(); err != nil {
		return c, err
	}
	var haveID, havePorts bool
	for r.more() {
		name, err := r.name()
		if err != nil {
			return c, err
		}
		switch string(name) {
		case "id":
			s, err := r.requiredString("id")
			if err != nil {
				return c, err
			}
			if err := checkCandidateID("id", s); err != nil {
				return c, err
			}
			c.ID, haveID = s, true
		case "ports":
			if c.Ports, err = r.ports("ports", &st.ports); err != nil {
				return c, err
			}
			havePorts = true
		case "attributes":
			if c.Attributes, err = r.attributes("attributes", &st.attrs); err != nil {
				return c, err
			}
		case "metrics":
			if err := r.metrics(&c.Metrics); err != nil {
				return c, prefixed(err, "metrics")
			}
		default:
			if err := r.skip(); err != nil {
				return c, err
			}
		}
	}
	if err := r.token(); err != nil {
		return c, err
	}
	switch {
	case !haveID:
		return c, invalid("id", titleMissing, "candidate id is required")
	case !havePorts:
		return c, invalid("ports", titleMissing, "candidate ports are required")
	}
	return c, nil
}

// validCandidateID is the candidate id rule: at most MaxIDBytes bytes with
// exactly one '/', text on both sides.
func validCandidateID(s string) bool {
	slash := strings.IndexByte(s, '/')
	return len(s) <= MaxIDBytes && slash > 0 && slash < len(s)-1 && strings.IndexByte(s[slash+1:], '/') < 0
}

// checkCandidateID enforces `^[^/]+/[^/]+$` and the 256-byte bound. The
// byte bound is the Gateway's (it refuses longer ids before sending); the
// schema's maxLength counts characters, so bytes is the stricter reading
// and every id the Gateway can send passes.
func checkCandidateID(field, s string) error {
	switch {
	case validCandidateID(s):
		return nil
	case len(s) > MaxIDBytes:
		return invalid(field, titleValue, "must be at most %d bytes, got %d", MaxIDBytes, len(s))
	default:
		return invalid(field, titleValue, "must be namespace/pod-name with exactly one '/', got %q", s)
	}
}

// ports appends the ports to *ar and returns the window holding them.
func (r *reader) ports(field string, ar *[]int) ([]int, error) {
	k, err := r.peek()
	switch {
	case err != nil:
		return nil, err
	case k == 'n':
		return nil, invalid(field, titleMissing, "ports are required and must not be null")
	case k != '[':
		return nil, invalid(field, titleType, "must be an array, got %s", kindName(k))
	}
	if err := r.token(); err != nil {
		return nil, err
	}
	start := len(*ar)
	for i := 0; r.more(); i++ {
		pf := func() string { return field + "[" + strconv.Itoa(i) + "]" } // only on error
		k, err := r.peek()
		if err != nil {
			return nil, err
		}
		if k != '0' {
			return nil, invalid(pf(), titleType, "must be an integer, got %s", kindName(k))
		}
		lit, err := r.literal()
		if err != nil {
			return nil, err
		}
		x, ok := integral(lit)
		if !ok {
			return nil, invalid(pf(), titleType, "must be an integer, got %s", lit)
		}
		if x < 1 || x > 65535 {
			return nil, invalid(pf(), titleValue, "port %d is outside 1..65535", x)
		}
		*ar = append(*ar, int(x))
	}
	if len(*ar) == start {
		if _, err := r.peek(); err != nil {
			return nil, err
		}
		return nil, invalid(field, titleValue, "must list at least one port")
	}
	if err := r.token(); err != nil {
		return nil, err
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

// ValidAttributeName reports whether s matches `^[A-Za-z][A-Za-z0-9_./-]{0,127}$`,
// the pattern the contract uses for candidate attribute keys (pod label
// keys such as topology.kubernetes.io/zone) and policy attribute names.
// Policies use it too, so a rule can never name an attribute that no
// request could carry.
func ValidAttributeName(s string) bool {
	if len(s) == 0 || len(s) > MaxAttributeNameLen || attrNameByte[s[0]] != attrLetter {
		return false
	}
	for i := 1; i < len(s); i++ {
		if attrNameByte[s[i]] == 0 {
			return false
		}
	}
	return true
}

// Classes of attrNameByte: 0 = not allowed, attrLetter = allowed anywhere,
// attrOther = allowed after the first byte.
const (
	attrLetter = 1
	attrOther  = 2
)

// attrNameByte classifies bytes for ValidAttributeName (one table load
// per byte instead of a chain of range checks).
var attrNameByte = func() (t [256]uint8) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c], t[c+'a'-'A'] = attrLetter, attrLetter
	}
	for _, c := range "0123456789_./-" {
		t[c] = attrOther
	}
	return t
}()

// attributes appends an attributes object to *ar and returns the window it
// used. The member count is checked before any member (as a whole-object
// rule), so member errors are held until the object is read.
func (r *reader) attributes(field string, ar *Attributes) (Attributes, error) {
	if err := r.optional(field, '{'); err != nil {
		return nil, err
	}
	start := len(*ar)
	var first error
	n := 0
	for ; r.more(); n++ {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		if first != nil || n >= MaxAttributes {
			if err := r.skip(); err != nil {
				return nil, err
			}
			continue
		}
		attr := Attribute{Name: r.nameString(name)}
		if !ValidAttributeName(attr.Name) {
			first = invalid(field, titleValue, "attribute name %q must match ^[A-Za-z][A-Za-z0-9_./-]{0,127}$", attr.Name)
			if err := r.skip(); err != nil {
				return nil, err
			}
			continue
		}
		k, err := r.peek()
		if err != nil {
			return nil, err
		}
		if k != '"' {
			first = invalid(field+"."+attr.Name, titleType, "attribute values must be strings, got %s", kindName(k))
			if err := r.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if attr.Value, err = r.text(); err != nil {
			return nil, err
		}
		if len(attr.Value) > MaxAttributeValueLen && utf8.RuneCountInString(attr.Value) > MaxAttributeValueLen {
			first = invalid(field+"."+attr.Name, titleValue, "attribute value must be at most %d characters, got %d",
				MaxAttributeValueLen, utf8.RuneCountInString(attr.Value))
			continue
		}
		*ar = append(*ar, attr)
	}
	if err := r.token(); err != nil {
		return nil, err
	}
	switch {
	case n > MaxAttributes:
		return nil, invalid(field, titleValue, "at most %d attributes are allowed, got %d", MaxAttributes, n)
	case first != nil:
		return nil, first
	case n == 0:
		return Attributes{}, nil
	}
	return (*ar)[start:len(*ar):len(*ar)], nil
}

// metrics decodes a metrics object; error fields are relative to it.
//
// The Gateway omits unavailable, non-finite, negative or above-one values
// itself, so an out-of-range value here means a non-Gateway client or a
// Gateway bug; it is rejected rather than clamped so the problem is seen.
func (r *reader) metrics(out *Metrics) error {
	if err := r.optional("", '{'); err != nil {
		return err
	}
	for r.more() {
		name, err := r.name()
		if err != nil {
			return err
		}
		var mf string // relative; the caller prefixes the path on error
		switch string(name) {
		case "runningRequests":
			mf = "runningRequests"
		case "engineUtilization":
			mf = "engineUtilization"
		case "kvCacheUsage":
			mf = "kvCacheUsage"
		default:
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if err := r.optional(mf, '0'); err != nil {
			return err
		}
		lit, err := r.literal()
		if err != nil {
			return err
		}
		if mf == "runningRequests" {
			x, ok := integral(lit)
			if !ok {
				return invalid(mf, titleType, "must be an integer, got %s", lit)
			}
			if x < 0 {
				return invalid(mf, titleValue, "must be >= 0, got %d", x)
			}
			out.RunningRequests, out.HasRunningRequests = x, true
			continue
		}
		f, ok := finite(lit)
		if !ok || f < 0 || f > 1 {
			return invalid(mf, titleValue, "must be a ratio in [0,1], got %s", lit)
		}
		if mf == "kvCacheUsage" {
			out.KVCacheUsage, out.HasKVCacheUsage = f, true
		} else {
			out.EngineUtilization, out.HasEngineUtilization = f, true
		}
	}
	return r.token()
}
