package bus

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestAffinityTrailer pins the tolerant reading of the append-only target
// trailer: every body length from the original seven fields up is
// accepted, each present trailer field is read, absent ones are zero, a
// bodiless target drops port and ttl (canonical form), and future fields
// after the trailer are skipped. Bad trailer values are malformed.
func TestAffinityTrailer(t *testing.T) {
	head := []any{"m", "g", "s", 3, nil, 5, 6}
	body := func(extra ...any) []byte {
		return encodeTree(t, []any{1, 2, "peer", 9, append(slices.Clone(head), extra...)})
	}
	base := Affinity{Sender: "peer", BootID: 9, Model: "m", Group: "g", SessionID: "s", Owner: kvwire.Owner{Worker: 3}, Sequence: 5, Writer: 6}
	with := func(target string, port, ttl uint32) *Affinity {
		a := base
		a.Target, a.Port, a.TTLMillis = target, port, ttl
		return &a
	}
	tests := []struct {
		name string
		data []byte
		want *Affinity // nil: ErrMalformed
	}{
		{"seven fields", body(), with("", 0, 0)},
		{"target only", body("ns/pod"), with("ns/pod", 0, 0)},
		{"target and port", body("ns/pod", 8000), with("ns/pod", 8000, 0)},
		{"full trailer", body("ns/pod", 8000, 1000), with("ns/pod", 8000, 1000)},
		{"future field after trailer", body("ns/pod", 8000, 1000, map[string]any{"x": []any{1}}), with("ns/pod", 8000, 1000)},
		{"empty target drops port and ttl", body("", 8000, 1000), with("", 0, 0)},
		{"nil target", body(nil, 8000, 1000), with("", 0, 0)},
		{"target not a string", body(7, 8000, 1000), nil},
		{"port not an int", body("ns/pod", "8000", 1000), nil},
		{"port overflow", body("ns/pod", uint64(1)<<32, 1000), nil},
		{"ttl overflow", body("ns/pod", 1, uint64(1)<<32), nil},
		{"ttl negative", body("ns/pod", 1, -1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeEnvelope(tt.data)
			if tt.want == nil {
				if !errors.Is(err, ErrMalformed) || m != nil {
					t.Fatalf("DecodeEnvelope = %+v, %v; want ErrMalformed", m, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("got %+v\nwant %+v", m, tt.want)
			}
			// The decoded form is canonical: it re-encodes to bytes that decode to it.
			b, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := DecodeEnvelope(b); err != nil || !reflect.DeepEqual(back, m) {
				t.Fatalf("re-decode = %+v, %v", back, err)
			}
		})
	}
}

// TestAffinityDecodeIntoClearsTrailer: decoding a worker binding into an
// Affinity that last held a target binding leaves no stale trailer.
func TestAffinityDecodeIntoClearsTrailer(t *testing.T) {
	target, err := Marshal(goldenMessages()["affinity_target"])
	if err != nil {
		t.Fatal(err)
	}
	plain := readGolden(t, "affinity_rank")
	d := NewDecoder()
	var a Affinity
	if err := d.DecodeInto(target, &a); err != nil || a.Target == "" {
		t.Fatalf("target binding: %+v, %v", a, err)
	}
	if err := d.DecodeInto(plain, &a); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&a, goldenMessages()["affinity_rank"]) {
		t.Fatalf("stale fields after reuse: %+v", a)
	}
}
