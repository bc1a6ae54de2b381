package api

// Tests of the strict request decoder: its tables against the structs, its verdicts and values
// against the encoding/json-based reference (jsonref_test.go) on generated bodies and on
// hand-picked edge cases, and the serde rules (exact-case names, duplicate fields) with the
// messages clients see.

import (
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
)

// TestEveryFieldBinds decodes, for every request type, a body that sets every JSON field of
// the struct and of the structs nested in it, and checks that each field came out non-zero:
// a field added to a request type in core/engine is decoded by its tag, never silently
// ignored (or bound under another name).
func TestEveryFieldBinds(t *testing.T) {
	decoders := map[reflect.Type]func([]byte) (any, error){
		reflect.TypeFor[core.SelectRequest]():      func(b []byte) (any, error) { var v core.SelectRequest; return v, decodeBody(b, &v) },
		reflect.TypeFor[core.ReservationRequest](): func(b []byte) (any, error) { var v core.ReservationRequest; return v, decodeBody(b, &v) },
		reflect.TypeFor[core.PromptQuery]():        func(b []byte) (any, error) { var v core.PromptQuery; return v, decodeBody(b, &v) },
		reflect.TypeFor[core.WorkerSpec]():         func(b []byte) (any, error) { var v core.WorkerSpec; return v, decodeBody(b, &v) },
		reflect.TypeFor[outputBlockRequest]():      func(b []byte) (any, error) { var v outputBlockRequest; return v, decodeBody(b, &v) },
		reflect.TypeFor[peerRequest]():             func(b []byte) (any, error) { var v peerRequest; return v, decodeBody(b, &v) },
	}
	for _, rt := range requestTypes {
		body := sampleJSON(rt.typ)
		v, err := decoders[rt.typ]([]byte(body))
		if err != nil {
			t.Fatalf("%v: %s: %v", rt.typ, body, err)
		}
		if zero := zeroField(reflect.ValueOf(v), rt.typ.Name()); zero != "" {
			t.Errorf("%v: field %s did not bind from %s", rt.typ, zero, body)
		}
	}
}

// sampleJSON is a JSON value for type t that sets every field to a non-zero value.
func sampleJSON(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return sampleJSON(t.Elem())
	case reflect.Uint64, reflect.Uint32, reflect.Int64:
		return "1"
	case reflect.Float64, reflect.Float32:
		return "0.5"
	case reflect.Bool:
		return "true"
	case reflect.String:
		return `"x"`
	case reflect.Slice:
		return "[" + sampleJSON(t.Elem()) + "]"
	case reflect.Array:
		return "[1,2]"
	case reflect.Map:
		return `{"k":` + sampleJSON(t.Elem()) + "}"
	case reflect.Struct:
		var parts []string
		for name, ft := range jsonFields(t) {
			parts = append(parts, strconv.Quote(name)+":"+sampleJSON(ft))
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ",") + "}"
	}
	panic("no sample for " + t.String())
}

// zeroField returns the path of the first JSON field of v (recursively) that is zero, or "".
func zeroField(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return path
		}
		return zeroField(v.Elem(), path)
	case reflect.Slice:
		if v.Len() == 0 {
			return path
		}
		return zeroField(v.Index(0), path+"[0]")
	case reflect.Map:
		if v.Len() == 0 {
			return path
		}
		return zeroField(v.MapIndex(v.MapKeys()[0]), path+".k")
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if tag := f.Tag.Get("json"); tag == "-" || !f.IsExported() {
				continue
			}
			if z := zeroField(v.Field(i), path+"."+f.Name); z != "" {
				return z
			}
		}
		return ""
	}
	if v.IsZero() {
		return path
	}
	return ""
}

// TestDecoderMatchesReference is the property test: on generated bodies for every request
// type, each table's verdict (decoded, 400 or 422) and decoded value equal the reference's.
func TestDecoderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	g := &bodyGen{r: r}
	n := 1500
	if testing.Short() {
		n = 200
	}
	// counts tallies the reference's verdicts on each body for its own type. A generator that
	// drifted into producing only errors (or only valid bodies) would make the comparison
	// vacuous, so each class must stay above 5% of the bodies.
	var counts [3]int
	for i := range n * len(requestTypes) {
		rt := requestTypes[i%len(requestTypes)]
		body := g.body(rt.typ)
		if err := compareAll(body); err != nil {
			t.Fatal(err)
		}
		switch refDecode(body, reflect.New(rt.typ).Interface()) {
		case 0:
			counts[0]++
		case http.StatusBadRequest:
			counts[1]++
		default:
			counts[2]++
		}
	}
	t.Logf("generated bodies: %d decoded, %d syntax errors, %d data errors", counts[0], counts[1], counts[2])
	for i, c := range counts {
		if c < n/20 {
			t.Errorf("outcome class %d occurred only %d times: the generator no longer exercises it", i, c)
		}
	}
}

// TestDecoderEdgeCases compares hand-picked bodies with the reference: nesting limits,
// number bounds, escapes, top-level oddities and trailing data.
func TestDecoderEdgeCases(t *testing.T) {
	// deep nests n arrays/objects in total: 10000 is encoding/json's limit, 10001 is over it.
	deep := func(n int) string {
		return `{"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	bodies := []string{
		deep(10000), deep(10001), `{"token_ids":` + strings.Repeat("[", 20000),
		`{"token_ids":[4294967295]}`, `{"token_ids":[4294967296]}`, `{"token_ids":[99999999999]}`,
		`{"token_ids":[0,00]}`, `{"token_ids":[1.0]}`, `{"token_ids":[-0]}`, `{"token_ids":[1e2]}`,
		`{"token_ids":[ 1 , 2 ]}`, `{"token_ids":[1,]}`, `{"token_ids":[,1]}`, `{"token_ids":[null,1]}`,
		`{"block_hashes":[-9223372036854775808,9223372036854775807]}`, `{"block_hashes":[-9223372036854775809]}`,
		`{"block_hashes":[9223372036854775808]}`, `{"block_hashes":[-]}`, `{"block_hashes":[-0,-01]}`,
		`{"block_hashes":[123456789012345678]}`, `{"block_hashes":[1234567890123456789]}`,
		`{"isl_tokens":18446744073709551615}`, `{"isl_tokens":18446744073709551616}`,
		`{"priority_jump":1e400}`, `{"priority_jump":-0}`, `{"priority_jump":1E-400}`,
		`{"worker_id":1,"kv_transfer_preferred_weight":3.5e38}`, `{"kv_transfer_preferred_weight":3.4e38}`,
		`{"selection_id":"\ud83d\ude00\ud800\udc00x\ud800"}`, `{"selection_id":"\ud800\u0041"}`,
		"{\"selection_id\":\"\xff\xfe\"}", "{\"selection_id\":\"a\x01\"}", `{"selection_id":"\x"}`,
		`{"selection_id":"\u12"}`, `{"selection_id":"\u12`, `{"selection_id":"\'"}`,
		`{"selection\u005fid":"a"}`, `{"Selection_ID":"a"}`, `{"selection_id":"a","selection_id":"b"}`,
		`{"session_context":{"session_id":"a","session_id":"b"}}`, `{"x":1,"x":2}`,
		`{"mm_routing_info":{"routing_token_ids":[1],"block_mm_infos":[null,{"mm_objects":[{"mm_hash":1,"offsets":[[1,2,"x"],[3],null]}]}]}}`,
		`{"routing_constraints":{"preferred_taints":{"a":1,"a":2,"b":null}}}`,
		`{"session_context":{"session_id":"s","agent_headers":{"h":["a",null],"g":null}}}`,
		`{"advisory":null}`, `{"advisory":1}`, `{"token_ids":null}`, `{"token_ids":[]}`, `{"token_ids":{}}`,
		`null`, ` null `, `null x`, `nullx`, `nul`, `[]`, `[]x`, `[1,]`, `"x"`, `"x"y`, `"x" y`, `1`, `1x`,
		`1 x`, `true`, `truex`, `{}`, `{} `, `{}x`, `{} {}`, `{}]`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1 "b":2}`,
		`{"worker_id":"9"}x`, `{"worker_id":"9",}`, `{"Worker_ID":"9"}x`, `{"worker_id":1,"worker_id":1}x`,
		"", " ", "\ufeff{}", `{"a":tru}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":.5}`, `{"a":+1}`,
	}
	for _, b := range bodies {
		if err := compareAll([]byte(b)); err != nil {
			t.Error(err)
		}
	}
}

// TestStrictnessRules pins the serde rules and their messages on POST /workers and /select.
func TestStrictnessRules(t *testing.T) {
	cases := []struct {
		name, body string
		status     int    // 0: decoded
		msg        string // fragment of the error
	}{
		{"wrong case is an unknown field", `{"Worker_ID":1,"endpoint":"e"}`, 0, ""},
		{"duplicate field", `{"worker_id":1,"worker_id":2}`, 422, "duplicate field `worker_id` at line 1 column"},
		{"duplicate via an escaped key", `{"worker_id":1,"worker\u005fid":2}`, 422, "duplicate field `worker_id`"},
		{"duplicate null", `{"endpoint":null,"endpoint":"e"}`, 422, "duplicate field `endpoint`"},
		{"unknown fields repeat freely", `{"x":1,"x":{"y":[1]},"worker_id":3}`, 0, ""},
		{"wrong type", `{"worker_id":"9"}`, 422, `worker_id: invalid type: string "9", expected u64`},
		{"negative", `{"block_size":-1}`, 422, "block_size: invalid value: integer `-1`, expected u32"},
		{"overflow", `{"block_size":4294967296}`, 422, "block_size: invalid value: integer `4294967296`, expected u32"},
		{"float for an integer", `{"block_size":1.5}`, 422, "block_size: invalid type: floating point `1.5`, expected u32"},
		{"nested path", `{"kv_events_endpoints":{"0":7}}`, 422, "kv_events_endpoints.0: invalid type: integer `7`, expected a string"},
		{"element path", `{"taints":["a",1]}`, 422, "taints[1]: invalid type: integer `1`, expected a string"},
		{"syntax wins over data", `{"worker_id":"9",}`, 400, "Failed to parse the request body as JSON: key must be a string at line 1 column 18"},
		{"data wins over trailing", `{"worker_id":"9"} x`, 422, "invalid type"},
		{"trailing", `{"worker_id":9} x`, 400, "trailing characters at line 1 column 17"},
		{"line and column", "{\n  \"worker_id\": 1,\n  \"worker_id\": 2}", 422, "at line 3 column 16"},
		{"not an object", `[1]`, 422, "invalid type: sequence, expected a JSON object"},
		{"null", `null`, 422, "invalid type: null, expected a JSON object"},
		{"empty", ``, 400, "EOF while parsing a value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var spec core.WorkerSpec
			err := decodeBody([]byte(tc.body), &spec)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("%s: %v", tc.body, err)
				}
				if strings.Contains(tc.body, "Worker_ID") && spec.WorkerID != nil {
					t.Fatalf("Worker_ID bound worker_id")
				}
				return
			}
			if err == nil || statusOf(err) != tc.status || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%s: got %v (status %d), want %d containing %q", tc.body, err, statusOf(err), tc.status, tc.msg)
			}
		})
	}
	// The hot bodies' nested structs and embedded prompt follow the same rules.
	for body, msg := range map[string]string{
		`{"token_ids":[1],"token_ids":[2]}`:                                              "duplicate field `token_ids`",
		`{"pinned_worker":{"worker_id":1,"dp_rank":0,"dp_rank":1}}`:                      "pinned_worker: duplicate field `dp_rank`",
		`{"token_ids":[1,2,"3"]}`:                                                        `token_ids[2]: invalid type: string "3", expected u32`,
		`{"router_config_override":{"router_temperature":"hot"}}`:                        `router_config_override.router_temperature: invalid type: string "hot", expected f64`,
		`{"mm_routing_info":{"block_mm_infos":[{"mm_objects":[{"offsets":[[1,-2]]}]}]}}`: "mm_routing_info.block_mm_infos[0].mm_objects[0].offsets[0][1]: invalid value",
	} {
		var req core.SelectRequest
		err := decodeBody([]byte(body), &req)
		if err == nil || statusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v, want 422 containing %q", body, err, msg)
		}
	}
	var req core.SelectRequest
	if err := decodeBody([]byte(`{"Token_IDs":[1],"token_ids":[2],"ADVISORY":true}`), &req); err != nil ||
		!slices.Equal(req.TokenIDs, []uint32{2}) || req.Advisory {
		t.Fatalf("case-mismatched keys were bound: %+v %v", req, err)
	}
}

// FuzzStrictDecoder compares every request table with the reference on arbitrary bodies. It
// checks the same property as the decoder half of FuzzHTTPDecode but without building a
// service per input, so it explores an order of magnitude more bodies per second.
func FuzzStrictDecoder(f *testing.F) {
	g := &bodyGen{r: rand.New(rand.NewPCG(1, 2))}
	for i := range 64 {
		f.Add(g.body(requestTypes[i%len(requestTypes)].typ))
	}
	for _, s := range []string{`{"token_ids":[1,2,3]}`, `{"Worker_ID":1}`, `{"a":1,"a":2}`, `null`, `{"x":[[[]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := compareAll(body); err != nil {
			t.Fatal(err)
		}
	})
}
