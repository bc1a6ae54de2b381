package aibrix

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvselect/kvselect/http/aibrix/internal/strictjson"
)

// This file decodes spec.candidates. Invariants established for every
// decoded candidate (relied on by Evaluate and the encoders):
//
//   - ID is unique within the request and has exactly one '/' with
//     non-empty text on both sides, at most MaxIDBytes bytes;
//   - Ports is non-empty, sorted ascending, duplicate-free, within 1..65535,
//     and a window (len == cap) of an arena shared by the whole request, so
//     appending to it can never overwrite another candidate's ports;
//   - Attributes has unique, pattern-valid names and string values within
//     the length bound (uniqueness comes from the parser's duplicate check);
//   - Metrics flags are set only for members present with in-range values.
//
// Error fields are built relative to the candidate and prefixed by the
// caller only when a request is rejected, so valid requests pay nothing
// for precise error paths.

// decodeCandidates decodes the candidates array into req.Candidates and
// enforces id uniqueness across candidates.
func decodeCandidates(v strictjson.Value, req *Request) error {
	switch v.Kind() {
	case strictjson.Array:
	case strictjson.Null:
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
	// reallocation of an arena leaves earlier windows on the old array,
	// which stays valid. This keeps allocations independent of n.
	ar := &arena{ports: make([]int, 0, 2*v.Len()), attrs: make(Attributes, 0, 2*v.Len())}
	// Small snapshots check uniqueness by scanning; larger ones use a map so
	// hostile inputs stay O(n).
	var seen map[string]int
	if v.Len() > 8 {
		seen = make(map[string]int, v.Len())
	}
	i := 0
	for e := v.First(); e.Valid(); e = e.Next() {
		c, err := decodeCandidate(e, ar)
		if err != nil {
			return prefixed(err, "spec.candidates["+strconv.Itoa(i)+"]")
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

// arena holds the shared backing arrays of one request's candidates.
type arena struct {
	ports []int
	attrs Attributes
}

// prefixed prepends prefix to the Field of a *RequestError whose Field is
// relative, so paths are only built when a request is rejected.
func prefixed(err error, prefix string) error {
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

// decodeCandidate decodes one candidate; error fields are relative to it.
func decodeCandidate(v strictjson.Value, ar *arena) (Candidate, error) {
	var c Candidate
	if v.Kind() != strictjson.Object {
		return c, invalid("", titleType, "each candidate must be an object, got %s", v.Kind())
	}
	var haveID, havePorts bool
	for m := v.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "id":
			s, err := requiredString("id", m)
			if err != nil {
				return c, err
			}
			if err := checkCandidateID("id", s); err != nil {
				return c, err
			}
			c.ID, haveID = s, true
		case "ports":
			ports, err := decodePorts("ports", m, &ar.ports)
			if err != nil {
				return c, err
			}
			c.Ports, havePorts = ports, true
		case "attributes":
			a, err := decodeAttributesInto("attributes", m, &ar.attrs)
			if err != nil {
				return c, err
			}
			c.Attributes = a
		case "metrics":
			if err := decodeMetrics(m, &c.Metrics); err != nil {
				return c, prefixed(err, "metrics")
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

// checkCandidateID enforces `^[^/]+/[^/]+$` and the 256-byte bound. The
// byte bound is the Gateway's (it refuses longer ids before sending); the
// schema's maxLength counts characters, so bytes is the stricter reading
// and every id the Gateway can send passes.
// The rule itself is validCandidateID's, shared with the fast decoder; this
// only explains a rejection.
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

// decodePorts appends the ports to *ar and returns the window holding them.
func decodePorts(field string, v strictjson.Value, ar *[]int) ([]int, error) {
	switch v.Kind() {
	case strictjson.Array:
	case strictjson.Null:
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
		if e.Kind() != strictjson.Number {
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

// decodeAttributes decodes an attributes object into its own slice.
func decodeAttributes(field string, v strictjson.Value) (Attributes, error) {
	var own Attributes
	return decodeAttributesInto(field, v, &own)
}

// decodeAttributesInto appends to *ar and returns the window it used.
func decodeAttributesInto(field string, v strictjson.Value, ar *Attributes) (Attributes, error) {
	if err := optionalKind(field, v, strictjson.Object); err != nil {
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
		if m.Kind() != strictjson.String {
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

// decodeMetrics decodes a metrics object; error fields are relative to it.
//
// The Gateway omits unavailable, non-finite, negative or above-one values
// itself, so an out-of-range value here means a non-Gateway client or a
// Gateway bug; it is rejected rather than clamped so the problem is seen.
func decodeMetrics(v strictjson.Value, out *Metrics) error {
	if err := optionalKind("", v, strictjson.Object); err != nil {
		return err
	}
	for m := v.First(); m.Valid(); m = m.Next() {
		mf := m.Key() // relative; the caller prefixes the path on error
		switch m.Key() {
		case "runningRequests":
			if err := optionalKind(mf, m, strictjson.Number); err != nil {
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
			if err := optionalKind(mf, m, strictjson.Number); err != nil {
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
