package bus

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
	"github.com/vmihailenco/msgpack/v5"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden files")

// goldenMessages are the fixed messages whose bytes are checked in. Adding
// one is fine; changing the bytes of an existing one is a wire break.
func goldenMessages() map[string]Message {
	return map[string]Message{
		"lifecycle_add": &Lifecycle{
			Sender: "tcp://selector-a:9092", BootID: 0x0123456789abcdef,
			Model: "meta-llama/Llama-3.1-8B", Group: "default", BlockSize: 16,
			RequestID: "req-1", Owner: kvwire.Owner{Worker: 7, Rank: 1}, Kind: LifecycleAdd,
			Add: &AddData{
				TokenSequence: []uint64{1, 300, 0xdeadbeefcafebabe},
				TrackPrefill:  true, PrefillTokens: 4096,
				ExpectedOutputTokens: new(uint32(128)),
				LoraName:             "adapter-a", ISL: 4100,
			},
		},
		"lifecycle_free": &Lifecycle{
			Sender: "b", BootID: 1, Model: "m", Group: "", BlockSize: 64,
			RequestID: "req-2", Owner: kvwire.Owner{Worker: 1 << 40, Rank: 0}, Kind: LifecycleFree,
		},
		"affinity_rank": &Affinity{
			Sender: "tcp://selector-a:9092", BootID: 42, Model: "m", Group: "g",
			SessionID: "sess-9", Owner: kvwire.Owner{Worker: 3, Rank: 2}, HasRank: true,
			Sequence: 1_700_000_000_000_000_000, Writer: 0xfeed,
		},
		"affinity_norank": &Affinity{
			Sender: "a", BootID: 43, Model: "m", SessionID: "s", Owner: kvwire.Owner{Worker: 4}, Sequence: 5, Writer: 6,
		},
		// An AIBrix target binding: the 10-field body with the trailer.
		"affinity_target": &Affinity{
			Sender: "tcp://selector-b:9092", BootID: 44, Model: "llama", Group: "\x00aibrix",
			SessionID: "user-17", Sequence: 1_700_000_000_000_000_001, Writer: 0xbeef,
			Target: "default/llama-0", Port: 8000, TTLMillis: 600_000,
		},
		"heartbeat": &Heartbeat{
			Sender: "tcp://selector-a:9092", BootID: math.MaxUint64,
			HTTPAddr: "10.0.0.7:8092", StartedAt: 1_700_000_000_123_456_789,
		},
		"heartbeat_leave": &Heartbeat{Sender: "x", BootID: 2, StartedAt: -5, Leaving: true},
		"live_set": &LiveSet{
			Sender: "tcp://selector-a:9092", BootID: 0x0123456789abcdef, Model: "meta-llama/Llama-3.1-8B",
			Group: "default", SetID: 1_700_000_000_000_000_007, Chunk: 1, Chunks: 3,
			IDs: []string{"req-1", "tenant/req-2", "8c7e2f0a-6a1b-4e0e-9d1c-3f5a7b9c1d2e"},
		},
		"live_set_empty": &LiveSet{Sender: "b", BootID: 9, Model: "m", SetID: 1, Chunks: 1},
		"resync_request": &ResyncRequest{Sender: "tcp://selector-b:9092", BootID: 77, Target: "tcp://selector-a:9092"},
	}
}

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", name+".hex"))
	if err != nil {
		t.Fatalf("read golden %s: %v (run with -update to create)", name, err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return b
}

// TestGoldenBytes pins the wire layout of every message type.
func TestGoldenBytes(t *testing.T) {
	for name, m := range goldenMessages() {
		t.Run(name, func(t *testing.T) {
			got, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".hex")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readGolden(t, name)
			if !bytes.Equal(got, want) {
				t.Fatalf("wire layout changed:\n got %x\nwant %x", got, want)
			}
			back, err := DecodeEnvelope(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, m) {
				t.Fatalf("decode(golden) = %+v, want %+v", back, m)
			}
		})
	}
}

// TestMsgpackInterop checks that the CustomEncoder/CustomDecoder hooks make
// msgpack.Marshal/Unmarshal agree with the hand-written codec.
func TestMsgpackInterop(t *testing.T) {
	for name, m := range goldenMessages() {
		t.Run(name, func(t *testing.T) {
			b, err := msgpack.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if want := readGolden(t, name); !bytes.Equal(b, want) {
				t.Fatalf("msgpack.Marshal = %x, want %x", b, want)
			}
			fresh := reflect.New(reflect.TypeOf(m).Elem()).Interface()
			if err := msgpack.Unmarshal(b, fresh); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fresh, m) {
				t.Fatalf("msgpack.Unmarshal = %+v, want %+v", fresh, m)
			}
		})
	}
}

// futureLifecycle builds what a hypothetical v2 sender might write: a higher
// version, an extra envelope field, extra body and add-data fields (one of
// them a nested structure).
func futureLifecycle(t testing.TB) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(enc.Encode([]any{
		2, 1, "tcp://future:1", uint64(99),
		[]any{"m", "g", 16, "r", 5, 0, 1,
			[]any{[]uint64{10, 20}, false, 7, nil, "", 9, true, map[string]any{"new": []any{1, "x"}}},
			"priority-class",
		},
		map[string]any{"trace": "abc"},
	}))
	return buf.Bytes()
}

func TestDecodeFutureVersion(t *testing.T) {
	want := &Lifecycle{
		Sender: "tcp://future:1", BootID: 99, Model: "m", Group: "g", BlockSize: 16,
		RequestID: "r", Owner: kvwire.Owner{Worker: 5, Rank: 0}, Kind: LifecycleAdd,
		Add: &AddData{TokenSequence: []uint64{10, 20}, PrefillTokens: 7, ISL: 9, Republish: true},
	}
	got, err := DecodeEnvelope(futureLifecycle(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	// A heartbeat map with keys this build doesn't know, in another order.
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode([]any{3, 3, "n", 1, map[string]any{"zz": []any{1, 2}, "t": 5, "h": "a:1", "load": 0.5}}); err != nil {
		t.Fatal(err)
	}
	hb, err := DecodeEnvelope(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Heartbeat{Sender: "n", BootID: 1, HTTPAddr: "a:1", StartedAt: 5}); !reflect.DeepEqual(hb, want) {
		t.Fatalf("heartbeat %+v, want %+v", hb, want)
	}
}

// encodeTree writes v with msgpack's generic reflection encoder, compact
// ints and sorted map keys: the naive reference for the hand-written codec.
func encodeTree(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// naiveTree is the reference layout of m as generic values.
func naiveTree(m Message) any {
	orNilP := func(v *uint32) any {
		if v == nil {
			return nil
		}
		return *v
	}
	orNil := func(has bool, v uint32) any {
		if has {
			return v
		}
		return nil
	}
	var body any
	switch m := m.(type) {
	case *Lifecycle:
		var add any
		if m.Add != nil {
			toks := m.Add.TokenSequence
			if toks == nil {
				toks = []uint64{}
			}
			add = []any{toks, m.Add.TrackPrefill, m.Add.PrefillTokens,
				orNilP(m.Add.ExpectedOutputTokens), m.Add.LoraName, m.Add.ISL}
		}
		body = []any{m.Model, m.Group, m.BlockSize, m.RequestID, m.Worker, m.Rank, uint8(m.Kind), add}
	case *Affinity:
		fields := []any{m.Model, m.Group, m.SessionID, m.Worker, orNil(m.HasRank, m.Rank), m.Sequence, m.Writer}
		if m.Target != "" {
			fields = append(fields, m.Target, m.Port, m.TTLMillis)
		}
		body = fields
	case *Heartbeat:
		body = map[string]any{"h": m.HTTPAddr, "t": m.StartedAt, "l": m.Leaving}
	case *ResyncRequest:
		body = []any{m.Target}
	case *LiveSet:
		ids := m.IDs
		if ids == nil {
			ids = []string{}
		}
		body = []any{m.Model, m.Group, m.SetID, m.Chunk, m.Chunks, ids}
	}
	s, b := m.Origin()
	return []any{1, uint8(m.Type()), s, b, body}
}

func randString(r *rand.Rand, max int) string {
	n := r.IntN(max + 1)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

// randUint returns values spread over every msgpack integer width.
func randUint(r *rand.Rand) uint64 {
	return r.Uint64() >> r.IntN(64)
}

// randMessage returns a random message in canonical form (the form decode
// produces: nil slices for empty, zero optional values when absent).
func randMessage(r *rand.Rand) Message {
	sender := "r" + randString(r, 20)
	boot := randUint(r)
	switch r.IntN(5) {
	case 0:
		l := &Lifecycle{Sender: sender, BootID: boot, Model: randString(r, 40), Group: randString(r, 10),
			BlockSize: uint32(randUint(r)), RequestID: randString(r, 36),
			Owner: kvwire.Owner{Worker: randUint(r), Rank: uint32(randUint(r))}, Kind: LifecycleKind(1 + r.IntN(3))}
		if l.Kind == LifecycleAdd {
			a := &AddData{TrackPrefill: r.IntN(2) == 0, PrefillTokens: randUint(r),
				LoraName: randString(r, 8), ISL: randUint(r)}
			if r.IntN(2) == 0 {
				a.ExpectedOutputTokens = new(uint32(randUint(r)))
			}
			for i := r.IntN(70); i > 0; i-- {
				a.TokenSequence = append(a.TokenSequence, randUint(r))
			}
			l.Add = a
		}
		return l
	case 1:
		a := &Affinity{Sender: sender, BootID: boot, Model: randString(r, 20), Group: randString(r, 5),
			SessionID: randString(r, 64), Owner: kvwire.Owner{Worker: randUint(r)}, HasRank: r.IntN(2) == 0,
			Sequence: randUint(r), Writer: randUint(r)}
		if a.HasRank {
			a.Rank = uint32(randUint(r))
		}
		if r.IntN(2) == 0 { // target binding; canonical form has no port/ttl without a target
			a.Target = randString(r, 40)
			if a.Target != "" {
				a.Port, a.TTLMillis = uint32(randUint(r)), uint32(randUint(r))
			}
		}
		return a
	case 2:
		ls := &LiveSet{Sender: sender, BootID: boot, Model: randString(r, 40), Group: randString(r, 10),
			SetID: randUint(r), Chunks: 1 + uint32(randUint(r)>>33)}
		ls.Chunk = uint32(randUint(r) % uint64(ls.Chunks))
		for i := r.IntN(40); i > 0; i-- {
			ls.IDs = append(ls.IDs, randString(r, 40))
		}
		return ls
	case 3:
		return &ResyncRequest{Sender: sender, BootID: boot, Target: "t" + randString(r, 30)}
	}
	return &Heartbeat{Sender: sender, BootID: boot, HTTPAddr: randString(r, 21),
		StartedAt: int64(randUint(r)) * int64(1-2*r.IntN(2)), Leaving: r.IntN(2) == 0}
}

// TestCodecMatchesNaiveReference is the property test: for random messages
// the hand-written encoder writes exactly what msgpack's generic encoder
// writes for the documented layout, and decoding returns the message.
func TestCodecMatchesNaiveReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	enc, dec := NewEncoder(), NewDecoder()
	for i := 0; i < 5000; i++ {
		m := randMessage(r)
		got, err := enc.Encode(m)
		if err != nil {
			t.Fatalf("encode %+v: %v", m, err)
		}
		if want := encodeTree(t, naiveTree(m)); !bytes.Equal(got, want) {
			t.Fatalf("message %d (%T): hand-written %x, reference %x", i, m, got, want)
		}
		back, err := dec.Decode(got)
		if err != nil {
			t.Fatalf("decode %T: %v", m, err)
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, m)
		}
	}
}

// TestDecodeIntoReusesSlices shows the hot-path contract: decoding into a
// recycled Lifecycle reuses its token slice and overwrites every field.
func TestDecodeIntoReusesSlices(t *testing.T) {
	big, _ := Marshal(goldenMessages()["lifecycle_add"])
	free, _ := Marshal(goldenMessages()["lifecycle_free"])
	var ev Lifecycle
	ev.Add = &AddData{TokenSequence: make([]uint64, 0, 8), LoraName: "stale", ExpectedOutputTokens: new(uint32(9))}
	backing := &ev.Add.TokenSequence[:1][0]
	d := NewDecoder()
	if err := d.DecodeInto(big, &ev); err != nil {
		t.Fatal(err)
	}
	if &ev.Add.TokenSequence[0] != backing {
		t.Fatal("token slice was reallocated although its capacity sufficed")
	}
	if !reflect.DeepEqual(&ev, goldenMessages()["lifecycle_add"]) {
		t.Fatalf("got %+v", ev)
	}
	if err := d.DecodeInto(free, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Add != nil || ev.Kind != LifecycleFree {
		t.Fatalf("free event kept add data: %+v", ev)
	}
	var hb Heartbeat
	if err := d.DecodeInto(big, &hb); !errors.Is(err, ErrWrongType) {
		t.Fatalf("lifecycle into heartbeat: %v, want ErrWrongType", err)
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecodeRejects(t *testing.T) {
	valid := readGolden(t, "lifecycle_add")
	tree := func(v any) []byte { return encodeTree(t, v) }
	okAdd := []any{[]uint64{}, true, 0, nil, "", 0}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"nil", []byte{0xc0}, ErrMalformed},
		{"not an array", tree("hello"), ErrMalformed},
		{"short envelope", tree([]any{1, 1, "a", 1}), ErrMalformed},
		{"version 0", tree([]any{0, 1, "a", 1, []any{}}), ErrMalformed},
		{"empty sender", tree([]any{1, 1, "", 1, []any{}}), ErrMalformed},
		{"type overflow", tree([]any{1, 300, "a", 1, []any{}}), ErrMalformed},
		{"unknown type", tree([]any{1, 9, "a", 1, []any{}}), ErrUnknownType},
		{"short body", tree([]any{1, 1, "a", 1, []any{"m", "g", 16}}), ErrMalformed},
		{"add without data", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, 0, 1, nil}}), ErrMalformed},
		{"kind 9", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, 0, 9, nil}}), ErrMalformed},
		{"rank overflow", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, uint64(1) << 33, 3, nil}}), ErrMalformed},
		{"block size overflow", tree([]any{1, 1, "a", 1, []any{"m", "g", uint64(1) << 32, "r", 1, 0, 3, nil}}), ErrMalformed},
		{"short add", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, 0, 1, []any{[]uint64{}}}}), ErrMalformed},
		{"token not int", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, 0, 1, []any{[]any{"x"}, true, 0, nil, "", 0}}}), ErrMalformed},
		{"ok add control", tree([]any{1, 1, "a", 1, []any{"m", "g", 16, "r", 1, 0, 1, okAdd}}), nil},
		// envelope header, 8-field body, then add data whose token array
		// claims 65535 elements with none following.
		{"lying token count", concat([]byte{0x95}, tree(1), tree(1), tree("a"), tree(1), []byte{0x98},
			tree("m"), tree("g"), tree(16), tree("r"), tree(1), tree(0), tree(1),
			[]byte{0x96, 0xdc, 0xff, 0xff}), ErrMalformed},
		{"huge array header", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"huge string header", []byte{0x95, 1, 1, 0xdb, 0xff, 0xff, 0xff, 0xff}, ErrMalformed},
		{"trailing bytes", append(bytes.Clone(valid), 0x00), ErrMalformed},
		// a 6-field heartbeat envelope whose unknown sixth field nests 1000 deep.
		{"deep nesting in unknown field", concat([]byte{0x96, 1, 3, 0xa1, 'a', 1, 0x80},
			bytes.Repeat([]byte{0x91}, 1000), []byte{0}), ErrMalformed},
		{"moderate nesting in unknown field is fine", concat([]byte{0x96, 1, 3, 0xa1, 'a', 1, 0x80},
			bytes.Repeat([]byte{0x91}, 10), []byte{0}), nil},
		{"heartbeat key not string", tree([]any{1, 3, "a", 1, map[int]any{1: 2}}), ErrMalformed},
		{"live set ok", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 1, []string{"x"}}}), nil},
		{"live set nil ids", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 1, nil}}), nil},
		{"live set newer trailer", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 1, []string{}, "future"}}), nil},
		{"live set zero chunks", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 0, []string{}}}), ErrMalformed},
		{"live set chunk past the end", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 2, 2, []string{}}}), ErrMalformed},
		{"live set short body", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 1}}), ErrMalformed},
		{"live set id not a string", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, 0, 1, []any{[]any{1}}}}), ErrMalformed},
		{"resync request ok", tree([]any{1, 5, "a", 1, []any{"b"}}), nil},
		{"resync request newer trailer", tree([]any{1, 5, "a", 1, []any{"b", 7}}), nil},
		{"resync request empty target", tree([]any{1, 5, "a", 1, []any{""}}), ErrMalformed},
		{"resync request no target", tree([]any{1, 5, "a", 1, []any{}}), ErrMalformed},
		{"live set chunk overflow", tree([]any{1, 4, "a", 1, []any{"m", "g", 7, uint64(1) << 32, 1, []string{}}}), ErrMalformed},
		{"heartbeat wrong value type", tree([]any{1, 3, "a", 1, map[string]any{"l": "yes"}}), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeEnvelope(tt.data)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeEnvelope = %+v, %v; want %v", m, err, tt.want)
			}
			if m != nil {
				t.Fatalf("message returned with error: %+v", m)
			}
		})
	}
}

// TestEveryPrefixRejected: no strict prefix of a valid envelope decodes.
func TestEveryPrefixRejected(t *testing.T) {
	for name := range goldenMessages() {
		b := readGolden(t, name)
		for i := 0; i < len(b); i++ {
			if _, err := DecodeEnvelope(b[:i]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s prefix %d/%d: %v, want ErrMalformed", name, i, len(b), err)
			}
		}
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	tests := []struct {
		name string
		m    Message
		want error
	}{
		{"no sender", &Heartbeat{}, ErrInvalidReplicaID},
		{"long sender", &Heartbeat{Sender: strings.Repeat("x", 257)}, ErrInvalidReplicaID},
		{"add without data", &Lifecycle{Sender: "a", Kind: LifecycleAdd}, ErrMalformed},
		{"kind zero", &Lifecycle{Sender: "a"}, ErrMalformed},
		{"live set without chunks", &LiveSet{Sender: "a"}, ErrMalformed},
		{"resync request without target", &ResyncRequest{Sender: "a"}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Marshal(tt.m); !errors.Is(err, tt.want) {
				t.Fatalf("Marshal = %v, want %v", err, tt.want)
			}
		})
	}
}
