package api

import (
	"fmt"
)

// Struct decoding for the strict request decoder: a table of a struct's JSON fields drives one
// generic object loop. This is where the rules that set kvselect apart from encoding/json live,
// matching what a serde(derive) struct does for Dynamo's clients:
//   - field names match exactly (case-sensitively, after unescaping the key): "Worker_ID" is
//     an unknown field, never worker_id;
//   - a field that appears twice is a data error, "duplicate field `x`" (422);
//   - unknown fields are skipped (their syntax is still checked).

// field is one JSON field of T: its name and how to decode it into a *T.
type field[T any] struct {
	name string
	dec  func(d *decoder, v *T) error
}

// structTable is the decoding table of T.
//
// Invariant: len(fields) <= 64 (the duplicate check is a bit set) and index maps every field's
// name to its position. Tables are built once at package initialisation and only read after,
// so they are safe for concurrent use.
type structTable[T any] struct {
	what   string // serde's name of the type, for "expected ..." messages
	fields []field[T]
	index  map[string]int
}

// newTable builds a table; it panics on a programming error (duplicate name, too many fields),
// which the package tests exercise by building every table.
func newTable[T any](what string, fields ...[]field[T]) *structTable[T] {
	t := &structTable[T]{what: what, index: map[string]int{}}
	for _, fs := range fields {
		for _, f := range fs {
			if _, dup := t.index[f.name]; dup {
				panic(fmt.Sprintf("api: field %q declared twice in %s", f.name, what))
			}
			t.index[f.name] = len(t.fields)
			t.fields = append(t.fields, f)
		}
	}
	if len(t.fields) > 64 {
		panic(fmt.Sprintf("api: %s has %d fields, more than the duplicate check tracks", what, len(t.fields)))
	}
	return t
}

// embed lifts the fields of an embedded struct E into its container T (for Prompt, which
// engine request types embed; encoding/json promotes its fields the same way).
func embed[T, E any](fs []field[E], get func(*T) *E) []field[T] {
	out := make([]field[T], len(fs))
	for i, f := range fs {
		dec := f.dec
		out[i] = field[T]{name: f.name, dec: func(d *decoder, v *T) error { return dec(d, get(v)) }}
	}
	return out
}

// object decodes the object at d.pos into v, which the caller provides zeroed.
//
// The duplicate check is a bit per field in seen; it covers fields given null too (serde
// counts a key, not a value). Unknown keys are not tracked, so an unknown key may repeat. A
// duplicate is reported as soon as its key is read, before its value, as serde does; the
// error carries the path of the struct, not of the field.
func object[T any](d *decoder, v *T, t *structTable[T]) error {
	if d.peek() != '{' {
		return d.typeErr(t.what)
	}
	if err := d.open(); err != nil {
		return err
	}
	var seen uint64
	for i := 0; ; i++ {
		key, more, err := d.nextMember(i)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		// string(key) in a map index does not allocate (the compiler's map-lookup rule).
		idx, known := t.index[string(key)]
		if !known {
			if err := d.skipValue(); err != nil {
				return err
			}
			continue
		}
		f := &t.fields[idx]
		if seen&(1<<idx) != 0 {
			return d.dataErr("duplicate field `" + f.name + "`")
		}
		seen |= 1 << idx
		if err := f.dec(d, v); err != nil {
			return withPath(err, f.name)
		}
	}
}

// optObject decodes into a pointer-to-struct field: null sets nil, an object a fresh T.
func optObject[T any](d *decoder, dst **T, t *structTable[T]) error {
	if isNull, err := d.null(); isNull {
		if err == nil {
			*dst = nil
		}
		return err
	}
	v := new(T)
	if err := object(d, v, t); err != nil {
		return err
	}
	*dst = v
	return nil
}
