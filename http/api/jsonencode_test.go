package api

// The hand-written response encoders must be byte-identical to encoding/json: checked on
// random responses (every optional present or absent, nil versus empty slices and maps,
// numbers at their bounds, strings with every character class encoding/json escapes) and by a
// fuzz target over arbitrary strings.

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// encStrings are strings covering encoding/json's escaping classes.
var encStrings = []string{
	"", "default", "http://worker-1:8000", `q"uote`, `back\slash`, "<tag>&amp;", "line\nfeed\r\t\b\f",
	"\x00\x01\x1f\x7f", "é日本😀", "\u2028\u2029", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "/slash",
}

// encGen draws response values. Strings mix the escaping classes (also concatenated, so
// escapes land next to each other and to multi-byte runes), integers include 0 and the type's
// maximum, slices are nil, empty or full, so every omitempty and null rule is hit both ways.
type encGen struct{ r *rand.Rand }

func (g encGen) str() string {
	if g.r.IntN(3) == 0 {
		var b []byte
		for range g.r.IntN(6) {
			b = append(b, encStrings[g.r.IntN(len(encStrings))]...)
		}
		return string(b)
	}
	return encStrings[g.r.IntN(len(encStrings))]
}

func (g encGen) u64() uint64 {
	switch g.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	default:
		return g.r.Uint64() >> g.r.IntN(64)
	}
}

func (g encGen) i64s() []int64 {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []int64{}
	}
	out := make([]int64, g.r.IntN(8))
	for i := range out {
		out[i] = int64(g.r.Uint64())
		if g.r.IntN(5) == 0 {
			out[i] = math.MinInt64
		}
	}
	return out
}

func maybe[T any](g encGen, v T) *T {
	if g.r.IntN(2) == 0 {
		return nil
	}
	return &v
}

// response is a random SelectResponse. dp maps get up to 22 keys, more than the 16 that
// appendOverlap sorts on the stack, so its heap fallback is covered too; a few keys are
// arbitrary strings, so key escaping and sorting by raw bytes are checked.
func (g encGen) response() *engine.SelectResponse {
	r := &engine.SelectResponse{
		SelectionID: maybe(g, g.str()), ModelName: g.str(), RoutingGroup: g.str(), WorkerID: g.u64(),
		DPRank: uint32(g.u64()), Endpoint: g.str(), BlockSize: uint32(g.u64()),
		Overlap:                engine.OverlapSummary{LongestMatched: g.u64(), GPU: g.u64(), CPU: g.u64(), Disk: g.u64()},
		EffectivePrefillTokens: g.u64(), PotentialDecodeBlocks: g.u64(), DecodeBusy: maybe(g, g.r.IntN(2) == 0),
	}
	if g.r.IntN(2) == 0 {
		r.Booked = &engine.Booked{SequenceHashes: g.i64s(), ISLTokens: g.u64(), TrackPrefillTokens: g.r.IntN(2) == 0}
	}
	if n := g.r.IntN(24) - 1; n >= 0 {
		r.Overlap.DP = map[string]uint64{}
		for range n {
			k := strconv.Itoa(g.r.IntN(40))
			if g.r.IntN(6) == 0 {
				k = g.str()
			}
			r.Overlap.DP[k] = g.u64()
		}
	}
	if g.r.IntN(2) == 0 {
		r.WorkerLoad = &engine.WorkerLoad{ActivePrefillTokens: g.u64(), PrefillTokenCapacity: g.u64(),
			TotalKVBlocks: maybe(g, g.u64()), PrefillBusy: maybe(g, g.r.IntN(2) == 0)}
	}
	if g.r.IntN(3) == 0 {
		h := &engine.KVHint{ProtocolVersion: g.str(), MessageID: g.str()}
		if n := g.r.IntN(4) - 1; n >= 0 {
			h.Actions = make([]engine.KVHintAction, n)
			for i := range h.Actions {
				h.Actions[i] = engine.KVHintAction{ActionID: g.str(), ActionType: g.str(), ActionVersion: g.str(),
					Payload: engine.KVHintPayload{SourceControlEndpoint: g.str(), BlockHashes: g.i64s()}}
			}
		}
		r.KVHint = h
	}
	return r
}

// TestSelectResponseEncodingMatchesStdlib compares the appenders with json.Marshal.
func TestSelectResponseEncodingMatchesStdlib(t *testing.T) {
	g := encGen{rand.New(rand.NewPCG(11, 3))}
	for range 5000 {
		r := g.response()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSelectResponse(nil, r); !bytes.Equal(got, want) {
			t.Fatalf("SelectResponse differs:\ngot  %s\nwant %s", got, want)
		}
		rr := &engine.ReservationResponse{SelectionID: g.str(), ModelName: g.str(), RoutingGroup: g.str(),
			WorkerID: g.u64(), DPRank: uint32(g.u64()), Endpoint: g.str()}
		want, _ = json.Marshal(rr)
		if got := appendReservationResponse(nil, rr); !bytes.Equal(got, want) {
			t.Fatalf("ReservationResponse differs:\ngot  %s\nwant %s", got, want)
		}
	}
	if want, _ := json.Marshal(map[string]string{"status": "ok"}); !bytes.Equal(okBytes, want) {
		t.Fatalf("okBytes = %s, want %s", okBytes, want)
	}
}

// FuzzResponseStrings checks the select encoder against encoding/json with an arbitrary string
// as a value and as a map key (the escaping itself is fuzzed in internal/jsonw).
func FuzzResponseStrings(f *testing.F) {
	for _, s := range encStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := &engine.SelectResponse{SelectionID: &s, ModelName: s, Overlap: engine.OverlapSummary{DP: map[string]uint64{s: 1, "0": 2}}}
		want, _ := json.Marshal(r)
		if got := appendSelectResponse(nil, r); !bytes.Equal(got, want) {
			t.Fatalf("%q in a response: got %s, want %s", s, got, want)
		}
	})
}

// encodedFields are the JSON names the appenders write for each response type. A field added
// to one of these structs in core/engine changes its reflected set and fails
// TestEncoderCoversResponses, even if it is an omitempty field that the random responses above
// would always leave out.
var encodedFields = map[reflect.Type][]string{
	reflect.TypeFor[engine.SelectResponse](): {"selection_id", "sequence_hashes", "isl_tokens", "track_prefill_tokens",
		"model_name", "routing_group", "worker_id", "dp_rank", "endpoint", "block_size", "overlap",
		"effective_prefill_tokens", "potential_decode_blocks", "decode_busy", "worker_load", "kv_hint"},
	reflect.TypeFor[engine.OverlapSummary]():      {"longest_matched", "gpu", "dp", "cpu", "disk"},
	reflect.TypeFor[engine.WorkerLoad]():          {"active_prefill_tokens", "prefill_token_capacity", "total_kv_blocks", "prefill_busy"},
	reflect.TypeFor[engine.KVHint]():              {"protocol_version", "message_id", "actions"},
	reflect.TypeFor[engine.KVHintAction]():        {"action_id", "action_type", "action_version", "payload"},
	reflect.TypeFor[engine.KVHintPayload]():       {"source_control_endpoint", "block_hashes"},
	reflect.TypeFor[engine.ReservationResponse](): {"selection_id", "model_name", "routing_group", "worker_id", "dp_rank", "endpoint"},
}

// TestEncoderCoversResponses compares encodedFields with the structs' JSON fields (embedded
// structs, pointer or not, promoted as encoding/json promotes them).
func TestEncoderCoversResponses(t *testing.T) {
	var names func(reflect.Type) []string
	names = func(t reflect.Type) []string {
		var out []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
				out = append(out, names(ft)...)
				continue
			}
			if tag != "-" && f.IsExported() {
				out = append(out, tag)
			}
		}
		return out
	}
	for typ, want := range encodedFields {
		if got := names(typ); !slices.Equal(got, want) {
			t.Errorf("%v: struct fields %v, encoder writes %v", typ, got, want)
		}
	}
}
