package bus

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeEnvelope: no input panics; whatever decodes re-encodes to bytes
// that decode to the same message (decode∘encode is the identity on the
// decoder's image).
func FuzzDecodeEnvelope(f *testing.F) {
	for name := range goldenMessages() {
		f.Add(readGolden(f, name))
	}
	f.Add(futureLifecycle(f))
	f.Add([]byte{0x95, 1, 1, 0xa1, 'a', 1, 0x98})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("error outside the documented set: %v", err)
			}
			return
		}
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("decoded message does not re-encode: %+v: %v", m, err)
		}
		m2, err := DecodeEnvelope(b)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("unstable round trip: %+v vs %+v", m, m2)
		}
	})
}

func benchLifecycle() *Lifecycle {
	ev := goldenMessages()["lifecycle_add"].(*Lifecycle)
	ev.Add.TokenSequence = ev.Add.TokenSequence[:0]
	for i := range 32 {
		ev.Add.TokenSequence = append(ev.Add.TokenSequence, 0x9e3779b97f4a7c15*uint64(i+1))
	}
	return ev
}

func BenchmarkLifecycleEncode(b *testing.B) {
	ev := benchLifecycle()
	enc := NewEncoder()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		out, err := enc.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes/msg")
}

func BenchmarkLifecycleDecodeInto(b *testing.B) {
	data, err := Marshal(benchLifecycle())
	if err != nil {
		b.Fatal(err)
	}
	dec := NewDecoder()
	var ev Lifecycle
	b.ReportAllocs()
	for b.Loop() {
		if err := dec.DecodeInto(data, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLifecycleDecodeNew(b *testing.B) {
	data, err := Marshal(benchLifecycle())
	if err != nil {
		b.Fatal(err)
	}
	dec := NewDecoder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
