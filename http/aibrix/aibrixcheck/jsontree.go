package aibrixcheck

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// The strict parse behind rules V2 and V3 and the problem-body check: jsontext (go-json-
// experiment/json) with its defaults, which reject malformed JSON, invalid UTF-8 and lone
// surrogate escapes, and repeated member names (compared after unescaping, case-sensitively);
// data after the first value is rejected here. The result is a small ordered tree, as the
// case-variant check walks members in document order.

// Parse errors the rules tell apart; any other parse error is malformed JSON.
var (
	errDuplicateMember = errors.New("duplicate object member")
	errTrailingData    = errors.New("trailing data after JSON value")
)

// jvalue is one parsed JSON value. kind is jsontext's, with 'f' folded into 't'; str holds a
// string's text or a number's literal; keys and vals hold an object's members in order, vals
// an array's elements. A nil *jvalue stands for an absent member and reads as null.
type jvalue struct {
	kind jsontext.Kind
	str  string
	keys []string
	vals []*jvalue
}

// parseJSON parses body, which must hold exactly one JSON value.
func parseJSON(body []byte) (*jvalue, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body))
	v, err := readJSON(dec)
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return nil, fmt.Errorf("%w: %v", errDuplicateMember, err)
	case err != nil:
		return nil, err
	}
	if rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%w at offset %d", errTrailingData, len(body)-len(rest))
	}
	return v, nil
}

func readJSON(dec *jsontext.Decoder) (*jvalue, error) {
	switch k := dec.PeekKind(); k {
	case '{', '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		v := &jvalue{kind: k}
		for dec.PeekKind() != '}' && dec.PeekKind() != ']' {
			if k == '{' {
				name, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, name.String())
			}
			elem, err := readJSON(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, elem)
		}
		_, err := dec.ReadToken()
		return v, err
	default:
		raw, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		v := &jvalue{kind: raw.Kind(), str: string(raw)}
		switch v.kind {
		case 'f':
			v.kind = 't'
		case '"':
			b, err := jsontext.AppendUnquote(nil, raw)
			v.str = string(b)
			return v, err
		}
		return v, nil
	}
}

// get returns the member called name of an object.
func (v *jvalue) get(name string) (*jvalue, bool) {
	if v == nil || v.kind != '{' {
		return nil, false
	}
	for i, k := range v.keys {
		if k == name {
			return v.vals[i], true
		}
	}
	return nil, false
}

// kindName names the kind the way findings do; an absent value is null.
func (v *jvalue) kindName() string {
	if v == nil {
		return "null"
	}
	switch v.kind {
	case 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "null"
}

func (v *jvalue) isKind(k jsontext.Kind) bool { return v != nil && v.kind == k }

// integer parses a number written as an integer literal (no fraction, no exponent) that fits
// int64: the strict reading Go's encoding/json applies to integer fields.
func (v *jvalue) integer() (int64, bool) {
	if !v.isKind('0') {
		return 0, false
	}
	x, err := strconv.ParseInt(v.str, 10, 64)
	return x, err == nil
}
