package api

import (
	"bytes"
	"reflect"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The Go types behind JSON names, from the request structs' json tags: what the duplicate
// walk and the error paths need to know (which names are fields, which levels are arrays).
// Only the error path uses them.

// jsonFields returns the JSON field names of struct type t with their types. An embedded
// struct without a tag name (engine.Prompt) contributes its fields, as the decoder inlines it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// serdePath renders JSON pointer p into body type t the way serde_path_to_error does:
// "mm_routing_info.block_mm_infos[0].offsets[1]", map keys as fields ("kv_events_endpoints.0").
// It also returns the Go type the pointer ends at (nil once the JSON leaves the type).
func serdePath(t reflect.Type, p jsontext.Pointer) (string, reflect.Type) {
	var b strings.Builder
	for tok := range p.Tokens() {
		switch t = deref(t); {
		case t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			b.WriteString("[" + tok + "]")
			t = t.Elem()
			continue
		case t != nil && t.Kind() == reflect.Struct:
			t = jsonFields(t)[tok]
		case t != nil && t.Kind() == reflect.Map:
			t = t.Elem()
		default:
			t = nil
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String(), t
}

// findDuplicateField walks the first value of body (valid or not) guided by type t and
// returns the data error for the first struct field that appears twice in one object, or nil
// (also when the walk meets a syntax error: the caller reports that). Repeated unknown fields
// and map keys are allowed.
func findDuplicateField(body []byte, t reflect.Type) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	w := dupWalk{dec: dec, body: body}
	w.value(t, "")
	return w.dup
}

type dupWalk struct {
	dec  *jsontext.Decoder
	body []byte
	dup  error
	bad  bool // a syntax error ended the walk
}

// value walks one value of type t at path; it returns false when the walk must stop.
func (w *dupWalk) value(t reflect.Type, path string) bool {
	t = deref(t)
	k := w.dec.PeekKind()
	switch {
	case t != nil && t.Kind() == reflect.Struct && k == '{':
		return w.object(jsonFields(t), nil, path)
	case t != nil && t.Kind() == reflect.Map && k == '{':
		return w.object(nil, t.Elem(), path)
	case t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && k == '[':
		if _, err := w.dec.ReadToken(); err != nil {
			return false
		}
		for i := 0; w.dec.PeekKind() != ']'; i++ {
			if w.dec.PeekKind() == 0 || !w.value(t.Elem(), path+"["+itoa(i)+"]") {
				return false
			}
		}
		_, err := w.dec.ReadToken()
		return err == nil
	}
	return w.dec.SkipValue() == nil
}

// object walks an object: a struct's (fields set) or a map's (elem set).
func (w *dupWalk) object(fields map[string]reflect.Type, elem reflect.Type, path string) bool {
	if _, err := w.dec.ReadToken(); err != nil {
		return false
	}
	var seen map[string]bool
	for w.dec.PeekKind() != '}' {
		tok, err := w.dec.ReadToken()
		if err != nil {
			return false
		}
		name := tok.String()
		ft := elem
		if fields != nil {
			var known bool
			if ft, known = fields[name]; !known {
				if w.dec.SkipValue() != nil {
					return false
				}
				continue
			}
			if seen[name] {
				// At the value, as serde reports it: after the name, the ':' and whitespace.
				off := int(w.dec.InputOffset())
				for off < len(w.body) && (w.body[off] == ':' || w.body[off] == ' ' || w.body[off] == '\t' || w.body[off] == '\n' || w.body[off] == '\r') {
					off++
				}
				w.dup = dataErrAt(w.body, off, path, "duplicate field `"+name+"`")
				return false
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[name] = true
		}
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		if !w.value(ft, sub) {
			return false
		}
	}
	_, err := w.dec.ReadToken()
	return err == nil
}
