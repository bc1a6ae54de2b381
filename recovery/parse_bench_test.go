package recovery

import (
	"bytes"
	"testing"
)

// countSink keeps nothing: the benchmark measures the parser alone.
type countSink struct{ events int }

func (s *countSink) Begin(Partition) error    { return nil }
func (s *countSink) Event(*RouterEvent) error { s.events++; return nil }
func (s *countSink) End(uint32) error         { return nil }
func (s *countSink) Abort(error)              {}

// BenchmarkParseDump parses a 100k-event dump (100 owners × 1,000-block chains, one block per
// event, kvselect's own /dump shape) from memory.
func BenchmarkParseDump(b *testing.B) {
	doc := genDump(1, 100, 1000)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		s := &countSink{}
		st, err := ParseDump(bytes.NewReader(doc), s, Limits{})
		if err != nil || st.Events != 100_000 {
			b.Fatalf("%v, %d events", err, st.Events)
		}
	}
}
