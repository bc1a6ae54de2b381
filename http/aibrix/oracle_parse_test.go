package aibrix

// The strict JSON parser behind the reference decoder (decodetree_test.go): the former
// internal/strictjson package, kept as test code so the differential tests compare the
// jsontext decoder with an independent implementation.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Sentinel errors. Every error returned by [sjParse] is a [*sjSyntaxError] that
// wraps exactly one of these, so callers classify with errors.Is.
var (
	// sjErrEmpty: the input holds no JSON value (empty or whitespace only).
	sjErrEmpty = errors.New("empty input")
	// sjErrSyntax: the input is not well-formed JSON (RFC 8259).
	sjErrSyntax = errors.New("malformed JSON")
	// sjErrDuplicateMember: an object repeats a member name.
	sjErrDuplicateMember = errors.New("duplicate object member")
	// sjErrTrailingData: a second value or other non-whitespace follows the first value.
	sjErrTrailingData = errors.New("trailing data after JSON value")
	// sjErrTooDeep: arrays/objects nest deeper than [sjMaxDepth].
	sjErrTooDeep = errors.New("JSON nesting too deep")
)

// sjMaxDepth bounds array/object nesting. The protocol's deepest legitimate
// document nests 6 levels; 64 leaves ample room for unknown additive members.
const sjMaxDepth = 64

// sjKind is the JSON type of a sjNode.
type sjKind uint8

// The JSON kinds.
const (
	sjNull sjKind = iota
	sjBool
	sjNumber
	sjString
	sjArray
	sjObject
)

// sjString names the kind the way problem details and checker findings do.
func (k sjKind) String() string {
	switch k {
	case sjNull:
		return "null"
	case sjBool:
		return "boolean"
	case sjNumber:
		return "number"
	case sjString:
		return "string"
	case sjArray:
		return "array"
	case sjObject:
		return "object"
	}
	return "invalid"
}

// sjSyntaxError reports where parsing stopped and why.
//
// Path is the JSON path of the innermost value being parsed when the error
// occurred (for example `spec.candidates[2]`), empty at the top level. Name is
// the repeated member name for sjErrDuplicateMember.
type sjSyntaxError struct {
	Offset int     // byte offset in the input
	Path   string  // JSON path, "" for the document root
	Name   string  // duplicate member name (sjErrDuplicateMember only)
	segs   []sjSeg // Path as segments
	Msg    string  // human-readable detail
	err    error   // one of the package sentinels
}

func (e *sjSyntaxError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%v at %s (offset %d): %s", e.err, e.Path, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%v (offset %d): %s", e.err, e.Offset, e.Msg)
}

// Unwrap returns the sentinel.
func (e *sjSyntaxError) Unwrap() error { return e.err }

// sjStrRef locates a string without holding a pointer: src[s:e] for text
// without escapes, or escaped[s] when esc is set. Keeping nodes pointer-free
// spares the garbage collector from scanning (and write-barriering) them.
type sjStrRef struct {
	s, e int32
	esc  bool
}

// sjNode is one JSON value. Invariants: first/next are -1 or valid indices into
// sjDoc.nodes; children of a sjNode form a singly linked list in document order
// through next; n counts that list. key is set only on object members; str
// holds a string value or the literal text of a number.
type sjNode struct {
	kind  sjKind
	b     bool
	str   sjStrRef
	key   sjStrRef
	first int32
	next  int32
	n     int32
}

// sjDoc is a parsed document. The zero sjDoc is not valid; use [sjParse].
type sjDoc struct {
	src     string   // the input, shared by every unescaped string
	escaped []string // unescaped copies of strings that contained escapes
	nodes   []sjNode
}

// sjNodePool recycles sjNode slices between documents (see [sjDoc.Release]).
// Nodes hold no pointers, so a recycled slice retains no garbage.
var sjNodePool sync.Pool

// sjMaxPooledNodes keeps very large documents from pinning memory.
const sjMaxPooledNodes = 1 << 16

func sjGetNodes(inputLen int) []sjNode {
	if p, ok := sjNodePool.Get().(*[]sjNode); ok {
		return (*p)[:0]
	}
	return make([]sjNode, 0, 16+inputLen/16)
}

// Release returns the document's sjNode storage for reuse by later parses.
// Strings already obtained from the document stay valid; the sjDoc and every
// sjValue of it must not be used afterwards. Calling Release is optional.
func (d *sjDoc) Release() {
	if d == nil || d.nodes == nil || cap(d.nodes) > sjMaxPooledNodes {
		return
	}
	nodes := d.nodes
	d.nodes = nil
	sjNodePool.Put(&nodes)
}

func (d *sjDoc) text(r sjStrRef) string {
	if r.esc {
		return d.escaped[r.s]
	}
	return d.src[r.s:r.e]
}

// Root returns the document's single top-level value.
func (d *sjDoc) Root() sjValue { return sjValue{d: d, i: 0} }

// sjParse parses exactly one JSON value from data. On failure it returns a
// [*sjSyntaxError]; the returned sjDoc is then nil.
func sjParse(data []byte) (*sjDoc, error) {
	// One copy of the input backs every member name, number literal and
	// escape-free string value as a substring, so parsing allocates O(1)
	// times plus once per escaped string.
	src := string(data)
	p := sjParser{data: data, src: src, doc: &sjDoc{src: src, nodes: sjGetNodes(len(data))}}
	p.skipWS()
	if p.pos >= len(data) {
		return nil, p.fail(sjErrEmpty, "no JSON value")
	}
	if _, err := p.value(0); err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos < len(data) {
		return nil, p.fail(sjErrTrailingData, fmt.Sprintf("unexpected %s after the value", sjDescribeByte(data[p.pos])))
	}
	return p.doc, nil
}

type sjParser struct {
	data []byte
	src  string // string(data), shared by all substrings
	pos  int
	doc  *sjDoc
}

func (p *sjParser) fail(sentinel error, msg string) *sjSyntaxError {
	return &sjSyntaxError{Offset: p.pos, Msg: msg, err: sentinel}
}

func sjDescribeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *sjParser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// add appends a sjNode and returns its index. Indices, not pointers, link
// nodes, so growing the slice never invalidates a link.
func (p *sjParser) add(n sjNode) int32 {
	n.first, n.next = -1, -1
	p.doc.nodes = append(p.doc.nodes, n)
	return int32(len(p.doc.nodes) - 1)
}

// value parses one value at p.pos (whitespace already skipped) and returns
// its sjNode index. depth counts the enclosing arrays/objects; object and
// array increment it before checking sjMaxDepth, so recursion is bounded.
func (p *sjParser) value(depth int) (int32, error) {
	if p.pos >= len(p.data) {
		return -1, p.fail(sjErrSyntax, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return -1, err
		}
		return p.add(sjNode{kind: sjString, str: s}), nil
	case c == 't':
		return p.literal("true", sjNode{kind: sjBool, b: true})
	case c == 'f':
		return p.literal("false", sjNode{kind: sjBool})
	case c == 'n':
		return p.literal("null", sjNode{kind: sjNull})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return -1, p.fail(sjErrSyntax, fmt.Sprintf("unexpected %s", sjDescribeByte(c)))
	}
}

func (p *sjParser) literal(word string, n sjNode) (int32, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return -1, p.fail(sjErrSyntax, "invalid literal")
	}
	p.pos += len(word)
	return p.add(n), nil
}

// number scans an RFC 8259 number and stores its literal text.
func (p *sjParser) number() (int32, error) {
	start := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return -1, p.fail(sjErrSyntax, "invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if !p.digits() {
			return -1, p.fail(sjErrSyntax, "invalid number: no digits after '.'")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return -1, p.fail(sjErrSyntax, "invalid number: no digits in exponent")
		}
	}
	return p.add(sjNode{kind: sjNumber, str: sjStrRef{s: int32(start), e: int32(p.pos)}}), nil
}

func (p *sjParser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// sjWithPath prefixes seg (an object key, or an array index when index) onto the
// error's path as the error unwinds. The path is kept as segments and rendered
// the way the decoder renders a JSON pointer (reader.path), so empty keys and
// keys starting with '[' render alike on both sides.
func sjWithPath(err error, seg string, index bool) error {
	var se *sjSyntaxError
	if errors.As(err, &se) {
		se.segs = append([]sjSeg{{seg, index}}, se.segs...)
		se.Path = sjRender(se.segs)
	}
	return err
}

// sjSeg is one step of an error path.
type sjSeg struct {
	s     string
	index bool
}

func sjRender(segs []sjSeg) string {
	var b strings.Builder
	for _, g := range segs {
		switch {
		case g.index:
			b.WriteString("[" + g.s + "]")
		case b.Len() > 0:
			b.WriteString("." + g.s)
		default:
			b.WriteString(g.s)
		}
	}
	return b.String()
}

// sjDupThreshold is the member count above which duplicate detection switches
// from a linear scan to a map (bounding hostile inputs to O(n)).
const sjDupThreshold = 16

// object parses an object. Members are linked in document order; each
// name is checked against the previous names of the same object before its
// value is parsed, so a duplicate is reported at the repeated name.
func (p *sjParser) object(depth int) (int32, error) {
	if depth > sjMaxDepth {
		return -1, p.fail(sjErrTooDeep, fmt.Sprintf("more than %d levels", sjMaxDepth))
	}
	self := p.add(sjNode{kind: sjObject})
	p.pos++ // '{'
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return self, nil
	}
	var (
		last int32 = -1
		seen map[string]struct{}
	)
	for {
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return -1, p.fail(sjErrSyntax, "expected a member name string")
		}
		keyPos := p.pos
		keyRef, err := p.str()
		if err != nil {
			return -1, err
		}
		key := p.doc.text(keyRef)
		if dup := p.isDup(self, key, &seen); dup {
			e := &sjSyntaxError{Offset: keyPos, Name: key, Msg: fmt.Sprintf("member %q appears more than once", key), err: sjErrDuplicateMember}
			return -1, e
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return -1, sjWithPath(p.fail(sjErrSyntax, "expected ':' after member name"), key, false)
		}
		p.pos++
		p.skipWS()
		child, err := p.value(depth)
		if err != nil {
			return -1, sjWithPath(err, key, false)
		}
		p.doc.nodes[child].key = keyRef
		last = p.appendChild(self, last, child)
		p.skipWS()
		if p.pos >= len(p.data) {
			return -1, p.fail(sjErrSyntax, "unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return self, nil
		default:
			return -1, p.fail(sjErrSyntax, fmt.Sprintf("expected ',' or '}' in object, found %s", sjDescribeByte(p.data[p.pos])))
		}
	}
}

// appendChild links child after last (-1: none yet) in container self, counts it, and returns
// it as the new last child.
func (p *sjParser) appendChild(self, last, child int32) int32 {
	if last < 0 {
		p.doc.nodes[self].first = child
	} else {
		p.doc.nodes[last].next = child
	}
	p.doc.nodes[self].n++
	return child
}

// isDup reports whether key already names a member of object self, which
// has n members so far. Large objects are indexed by *seen.
func (p *sjParser) isDup(self int32, key string, seen *map[string]struct{}) bool {
	if p.doc.nodes[self].n < sjDupThreshold {
		for c := p.doc.nodes[self].first; c >= 0; c = p.doc.nodes[c].next {
			if p.doc.text(p.doc.nodes[c].key) == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*sjDupThreshold)
		for c := p.doc.nodes[self].first; c >= 0; c = p.doc.nodes[c].next {
			(*seen)[p.doc.text(p.doc.nodes[c].key)] = struct{}{}
		}
	}
	if _, ok := (*seen)[key]; ok {
		return true
	}
	(*seen)[key] = struct{}{}
	return false
}

// array parses an array; element errors carry "[i]" path segments.
func (p *sjParser) array(depth int) (int32, error) {
	if depth > sjMaxDepth {
		return -1, p.fail(sjErrTooDeep, fmt.Sprintf("more than %d levels", sjMaxDepth))
	}
	self := p.add(sjNode{kind: sjArray})
	p.pos++ // '['
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return self, nil
	}
	var last int32 = -1
	for {
		p.skipWS()
		child, err := p.value(depth)
		if err != nil {
			return -1, sjWithPath(err, strconv.Itoa(int(p.doc.nodes[self].n)), true)
		}
		last = p.appendChild(self, last, child)
		p.skipWS()
		if p.pos >= len(p.data) {
			return -1, p.fail(sjErrSyntax, "unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return self, nil
		default:
			return -1, p.fail(sjErrSyntax, fmt.Sprintf("expected ',' or ']' in array, found %s", sjDescribeByte(p.data[p.pos])))
		}
	}
}
