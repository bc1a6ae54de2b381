package strictjson

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Sentinel errors. Every error returned by [Parse] is a [*SyntaxError] that
// wraps exactly one of these, so callers classify with errors.Is.
var (
	// ErrEmpty: the input holds no JSON value (empty or whitespace only).
	ErrEmpty = errors.New("empty input")
	// ErrSyntax: the input is not well-formed JSON (RFC 8259).
	ErrSyntax = errors.New("malformed JSON")
	// ErrDuplicateMember: an object repeats a member name.
	ErrDuplicateMember = errors.New("duplicate object member")
	// ErrTrailingData: a second value or other non-whitespace follows the first value.
	ErrTrailingData = errors.New("trailing data after JSON value")
	// ErrTooDeep: arrays/objects nest deeper than [MaxDepth].
	ErrTooDeep = errors.New("JSON nesting too deep")
)

// MaxDepth bounds array/object nesting. The protocol's deepest legitimate
// document nests 6 levels; 64 leaves ample room for unknown additive members.
const MaxDepth = 64

// Kind is the JSON type of a node.
type Kind uint8

// The JSON kinds.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// String names the kind the way problem details and checker findings do.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "invalid"
}

// SyntaxError reports where parsing stopped and why.
//
// Path is the JSON path of the innermost value being parsed when the error
// occurred (for example `spec.candidates[2]`), empty at the top level. Name is
// the repeated member name for ErrDuplicateMember.
type SyntaxError struct {
	Offset int    // byte offset in the input
	Path   string // JSON path, "" for the document root
	Name   string // duplicate member name (ErrDuplicateMember only)
	Msg    string // human-readable detail
	err    error  // one of the package sentinels
}

func (e *SyntaxError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%v at %s (offset %d): %s", e.err, e.Path, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%v (offset %d): %s", e.err, e.Offset, e.Msg)
}

// Unwrap returns the sentinel.
func (e *SyntaxError) Unwrap() error { return e.err }

// strRef locates a string without holding a pointer: src[s:e] for text
// without escapes, or escaped[s] when esc is set. Keeping nodes pointer-free
// spares the garbage collector from scanning (and write-barriering) them.
type strRef struct {
	s, e int32
	esc  bool
}

// node is one JSON value. Invariants: first/next are -1 or valid indices into
// Doc.nodes; children of a node form a singly linked list in document order
// through next; n counts that list. key is set only on object members; str
// holds a string value or the literal text of a number.
type node struct {
	kind  Kind
	b     bool
	str   strRef
	key   strRef
	first int32
	next  int32
	n     int32
}

// Doc is a parsed document. The zero Doc is not valid; use [Parse].
type Doc struct {
	src     string   // the input, shared by every unescaped string
	escaped []string // unescaped copies of strings that contained escapes
	nodes   []node
}

// nodePool recycles node slices between documents (see [Doc.Release]).
// Nodes hold no pointers, so a recycled slice retains no garbage.
var nodePool sync.Pool

// maxPooledNodes keeps very large documents from pinning memory.
const maxPooledNodes = 1 << 16

func getNodes(inputLen int) []node {
	if p, ok := nodePool.Get().(*[]node); ok {
		return (*p)[:0]
	}
	return make([]node, 0, 16+inputLen/16)
}

// Release returns the document's node storage for reuse by later parses.
// Strings already obtained from the document stay valid; the Doc and every
// Value of it must not be used afterwards. Calling Release is optional.
func (d *Doc) Release() {
	if d == nil || d.nodes == nil || cap(d.nodes) > maxPooledNodes {
		return
	}
	nodes := d.nodes
	d.nodes = nil
	nodePool.Put(&nodes)
}

func (d *Doc) text(r strRef) string {
	if r.esc {
		return d.escaped[r.s]
	}
	return d.src[r.s:r.e]
}

// Root returns the document's single top-level value.
func (d *Doc) Root() Value { return Value{d: d, i: 0} }

// Parse parses exactly one JSON value from data. On failure it returns a
// [*SyntaxError]; the returned Doc is then nil.
func Parse(data []byte) (*Doc, error) {
	// One copy of the input backs every member name, number literal and
	// escape-free string value as a substring, so parsing allocates O(1)
	// times plus once per escaped string.
	src := string(data)
	p := parser{data: data, src: src, doc: &Doc{src: src, nodes: getNodes(len(data))}}
	p.skipWS()
	if p.pos >= len(data) {
		return nil, p.fail(ErrEmpty, "no JSON value")
	}
	if _, err := p.value(0); err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos < len(data) {
		return nil, p.fail(ErrTrailingData, fmt.Sprintf("unexpected %s after the value", describeByte(data[p.pos])))
	}
	return p.doc, nil
}

type parser struct {
	data []byte
	src  string // string(data), shared by all substrings
	pos  int
	doc  *Doc
}

func (p *parser) fail(sentinel error, msg string) *SyntaxError {
	return &SyntaxError{Offset: p.pos, Msg: msg, err: sentinel}
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// add appends a node and returns its index. Indices, not pointers, link
// nodes, so growing the slice never invalidates a link.
func (p *parser) add(n node) int32 {
	n.first, n.next = -1, -1
	p.doc.nodes = append(p.doc.nodes, n)
	return int32(len(p.doc.nodes) - 1)
}

// value parses one value at p.pos (whitespace already skipped) and returns
// its node index. depth counts the enclosing arrays/objects; object and
// array increment it before checking MaxDepth, so recursion is bounded.
func (p *parser) value(depth int) (int32, error) {
	if p.pos >= len(p.data) {
		return -1, p.fail(ErrSyntax, "unexpected end of input")
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
		return p.add(node{kind: String, str: s}), nil
	case c == 't':
		return p.literal("true", node{kind: Bool, b: true})
	case c == 'f':
		return p.literal("false", node{kind: Bool})
	case c == 'n':
		return p.literal("null", node{kind: Null})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return -1, p.fail(ErrSyntax, fmt.Sprintf("unexpected %s", describeByte(c)))
	}
}

func (p *parser) literal(word string, n node) (int32, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return -1, p.fail(ErrSyntax, "invalid literal")
	}
	p.pos += len(word)
	return p.add(n), nil
}

// number scans an RFC 8259 number and stores its literal text.
func (p *parser) number() (int32, error) {
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
		return -1, p.fail(ErrSyntax, "invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		if !p.digits() {
			return -1, p.fail(ErrSyntax, "invalid number: no digits after '.'")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return -1, p.fail(ErrSyntax, "invalid number: no digits in exponent")
		}
	}
	return p.add(node{kind: Number, str: strRef{s: int32(start), e: int32(p.pos)}}), nil
}

func (p *parser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// withPath prefixes seg onto the error's path as the error unwinds.
func withPath(err error, seg string) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		switch {
		case se.Path == "":
			se.Path = seg
		case strings.HasPrefix(se.Path, "["):
			se.Path = seg + se.Path
		default:
			se.Path = seg + "." + se.Path
		}
	}
	return err
}

// dupThreshold is the member count above which duplicate detection switches
// from a linear scan to a map (bounding hostile inputs to O(n)).
const dupThreshold = 16

// object parses an object. Members are linked in document order; each
// name is checked against the previous names of the same object before its
// value is parsed, so a duplicate is reported at the repeated name.
func (p *parser) object(depth int) (int32, error) {
	if depth > MaxDepth {
		return -1, p.fail(ErrTooDeep, fmt.Sprintf("more than %d levels", MaxDepth))
	}
	self := p.add(node{kind: Object})
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
			return -1, p.fail(ErrSyntax, "expected a member name string")
		}
		keyPos := p.pos
		keyRef, err := p.str()
		if err != nil {
			return -1, err
		}
		key := p.doc.text(keyRef)
		if dup := p.isDup(self, key, &seen); dup {
			e := &SyntaxError{Offset: keyPos, Name: key, Msg: fmt.Sprintf("member %q appears more than once", key), err: ErrDuplicateMember}
			return -1, e
		}
		p.skipWS()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return -1, withPath(p.fail(ErrSyntax, "expected ':' after member name"), key)
		}
		p.pos++
		p.skipWS()
		child, err := p.value(depth)
		if err != nil {
			return -1, withPath(err, key)
		}
		p.doc.nodes[child].key = keyRef
		last = p.appendChild(self, last, child)
		p.skipWS()
		if p.pos >= len(p.data) {
			return -1, p.fail(ErrSyntax, "unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return self, nil
		default:
			return -1, p.fail(ErrSyntax, fmt.Sprintf("expected ',' or '}' in object, found %s", describeByte(p.data[p.pos])))
		}
	}
}

// appendChild links child after last (-1: none yet) in container self, counts it, and returns
// it as the new last child.
func (p *parser) appendChild(self, last, child int32) int32 {
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
func (p *parser) isDup(self int32, key string, seen *map[string]struct{}) bool {
	if p.doc.nodes[self].n < dupThreshold {
		for c := p.doc.nodes[self].first; c >= 0; c = p.doc.nodes[c].next {
			if p.doc.text(p.doc.nodes[c].key) == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*dupThreshold)
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
func (p *parser) array(depth int) (int32, error) {
	if depth > MaxDepth {
		return -1, p.fail(ErrTooDeep, fmt.Sprintf("more than %d levels", MaxDepth))
	}
	self := p.add(node{kind: Array})
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
			return -1, withPath(err, fmt.Sprintf("[%d]", p.doc.nodes[self].n))
		}
		last = p.appendChild(self, last, child)
		p.skipWS()
		if p.pos >= len(p.data) {
			return -1, p.fail(ErrSyntax, "unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return self, nil
		default:
			return -1, p.fail(ErrSyntax, fmt.Sprintf("expected ',' or ']' in array, found %s", describeByte(p.data[p.pos])))
		}
	}
}
