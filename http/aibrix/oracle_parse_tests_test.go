package aibrix

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sjToAny converts a parsed sjValue to the shape encoding/json produces with
// UseNumber, so the two parsers can be compared.
func sjToAny(v sjValue) any {
	switch v.Kind() {
	case sjNull:
		return nil
	case sjBool:
		return v.Bool()
	case sjNumber:
		return json.Number(v.Literal())
	case sjString:
		return v.Str()
	case sjArray:
		out := []any{}
		for e := v.First(); e.Valid(); e = e.Next() {
			out = append(out, sjToAny(e))
		}
		return out
	default:
		out := map[string]any{}
		for m := v.First(); m.Valid(); m = m.Next() {
			out[m.Key()] = sjToAny(m)
		}
		return out
	}
}

func sjStdDecode(data []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func TestOracleParseTable(t *testing.T) {
	tests := []struct {
		in   string
		want error
		path string
	}{
		{`{"a":[1,2,{"b":null}],"c":true,"d":"\u00e9\ud83d\ude00"}`, nil, ""},
		{`  7  `, nil, ""},
		{`-0.5e+10`, nil, ""},
		{``, sjErrEmpty, ""},
		{`{"a":1,"a":2}`, sjErrDuplicateMember, ""},
		{`{"x":{"a":1,"\u0061":2}}`, sjErrDuplicateMember, "x"},
		{`{"a":1,"A":2}`, nil, ""},
		{`[1] [2]`, sjErrTrailingData, ""},
		{`{}}`, sjErrTrailingData, ""},
		{`[1,]`, sjErrSyntax, "[1]"},
		{`{"a":1,}`, sjErrSyntax, ""},
		{`01`, sjErrTrailingData, ""},
		{`1.`, sjErrSyntax, ""},
		{`.5`, sjErrSyntax, ""},
		{`"\x"`, sjErrSyntax, ""},
		{"\"a\tb\"", sjErrSyntax, ""},
		{`"\udc00"`, sjErrSyntax, ""},
		{`"\ud800\u0041"`, sjErrSyntax, ""},
		{`nul`, sjErrSyntax, ""},
		{`{"a" 1}`, sjErrSyntax, "a"},
		{`{"a":[1,{"b":[x]}]}`, sjErrSyntax, "a[1].b[0]"},
		{strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat(`}`, 65), sjErrTooDeep, strings.TrimSuffix(strings.Repeat("a.", 64), ".")},
	}
	for _, tt := range tests {
		doc, err := sjParse([]byte(tt.in))
		if tt.want == nil {
			if err != nil {
				t.Errorf("sjParse(%q): %v", tt.in, err)
				continue
			}
			std, _ := sjStdDecode([]byte(tt.in))
			if got := sjToAny(doc.Root()); !reflect.DeepEqual(got, std) {
				t.Errorf("sjParse(%q) = %#v, encoding/json = %#v", tt.in, got, std)
			}
			continue
		}
		var se *sjSyntaxError
		if !errors.Is(err, tt.want) || !errors.As(err, &se) || se.Path != tt.path {
			t.Errorf("sjParse(%q) err = %v (path %q), want %v at %q", tt.in, err, sjPathOf(err), tt.want, tt.path)
		}
	}
}

func sjPathOf(err error) string {
	var se *sjSyntaxError
	if errors.As(err, &se) {
		return se.Path
	}
	return ""
}

func TestOracleLargeObjectDuplicates(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	if _, err := sjParse([]byte(b.String() + "}")); err != nil {
		t.Fatalf("unique large object: %v", err)
	}
	if _, err := sjParse([]byte(b.String() + `,"kxxxxx":2}`)); !errors.Is(err, sjErrDuplicateMember) {
		t.Fatalf("duplicate in large object: %v", err)
	}
}

func TestOracleNumbers(t *testing.T) {
	doc, err := sjParse([]byte(`[8000, 8000.0, 8e3, -1, 1e999, 9223372036854775808, 0.5]`))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		i, ii  int64
		iok    bool
		iiok   bool
		floats bool
	}
	wants := []want{
		{8000, 8000, true, true, true}, {0, 8000, false, true, true}, {0, 8000, false, true, true},
		{-1, -1, true, true, true}, {0, 0, false, false, false}, {0, 0, false, false, true}, {0, 0, false, false, true},
	}
	i := 0
	for e := doc.Root().First(); e.Valid(); e = e.Next() {
		x, ok := e.Int()
		y, ok2 := e.Integral()
		_, fok := e.Float()
		w := wants[i]
		if ok != w.iok || (ok && x != w.i) || ok2 != w.iiok || (ok2 && y != w.ii) || fok != w.floats {
			t.Errorf("%s: Int=%d,%v Integral=%d,%v Float ok=%v", e.Literal(), x, ok, y, ok2, fok)
		}
		i++
	}
}

// FuzzParse: never panics; anything accepted is valid JSON that
// encoding/json decodes to the same value; anything encoding/json accepts
// as a single value is accepted unless it repeats a member name, nests too
// deep or contains text encoding/json silently repairs.
func FuzzOracleParse(f *testing.F) {
	for _, s := range []string{`{"a":[1,2]}`, `{"a":1,"a":2}`, `"\ud83d\ude00"`, `[] []`, `-1.5e3`, `{"":{"":""}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := sjParse(data)
		if err != nil {
			var se *sjSyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		std, err := sjStdDecode(data)
		if err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", data, err)
		}
		if got := sjToAny(doc.Root()); !reflect.DeepEqual(got, std) {
			t.Fatalf("value differs for %q: %#v vs %#v", data, got, std)
		}
	})
}
