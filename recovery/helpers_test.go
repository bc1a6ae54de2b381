package recovery

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Shared test fixtures: a Sink that records what it is told and checks the call protocol
// (Begin, Events, then exactly one of End or Abort), and a generator of well-formed dumps.

// recPart is one partition as a recording sink saw it.
type recPart struct {
	P      Partition
	BS     uint32
	Events []RouterEvent // deep copies
}

// recSink records partitions and checks the Sink call protocol.
type recSink struct {
	t         testing.TB
	done      []recPart // completed (End returned nil)
	cur       *recPart
	aborts    []error
	discards  int
	failEvent func(ev *RouterEvent) error // optional injected Event error
	failBegin func(p Partition) error     // optional injected Begin error
}

func newRecSink(t testing.TB) *recSink { return &recSink{t: t} }

func (s *recSink) Begin(p Partition) error {
	if s.cur != nil {
		s.t.Errorf("Begin(%v) while %v is open", p, s.cur.P)
	}
	if s.failBegin != nil {
		if err := s.failBegin(p); err != nil {
			return err
		}
	}
	s.cur = &recPart{P: p}
	return nil
}

func (s *recSink) Event(ev *RouterEvent) error {
	if s.cur == nil {
		s.t.Errorf("Event outside a partition")
		return errors.New("no partition")
	}
	if s.failEvent != nil {
		if err := s.failEvent(ev); err != nil {
			return err
		}
	}
	c := *ev
	c.Blocks = slices.Clone(ev.Blocks)
	c.Removed = slices.Clone(ev.Removed)
	s.cur.Events = append(s.cur.Events, c)
	return nil
}

func (s *recSink) End(bs uint32) error {
	if s.cur == nil {
		s.t.Errorf("End outside a partition")
		return errors.New("no partition")
	}
	if bs == 0 {
		s.t.Errorf("End with block size 0")
	}
	s.cur.BS = bs
	s.done = append(s.done, *s.cur)
	s.cur = nil
	return nil
}

func (s *recSink) Abort(err error) {
	if s.cur == nil {
		s.t.Errorf("Abort(%v) outside a partition", err)
	}
	s.aborts = append(s.aborts, err)
	s.cur = nil
}

func (s *recSink) Discard(error) {
	s.discards++
	s.done = nil
	s.cur = nil
}

// blocks counts stored blocks over the completed partitions.
func (s *recSink) blocks() int {
	n := 0
	for _, p := range s.done {
		for _, e := range p.Events {
			n += len(e.Blocks)
		}
	}
	return n
}

// genDump writes a well-formed dump with parts partitions of chains owners, each storing a
// chain of depth blocks as single-block events (the shape kvselect's own /dump has).
func genDump(parts, owners, depth int) []byte {
	b := []byte{'{'}
	for p := 0; p < parts; p++ {
		if p > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"model-%d:default":{"block_size":16,"events":[`, p)
		id := 0
		for o := 0; o < owners; o++ {
			for d := 0; d < depth; d++ {
				if id > 0 {
					b = append(b, ',')
				}
				parent := "null"
				if d > 0 {
					parent = fmt.Sprint(uint64(o)<<32 | uint64(d-1))
				}
				b = fmt.Appendf(b, `{"worker_id":%d,"storage_tier":"device","event":{"event_id":%d,"data":{"stored":{"parent_hash":%s,"start_position":null,"blocks":[{"block_hash":%d,"tokens_hash":%d,"mm_extra_info":null}]}},"dp_rank":0}}`,
					o, id, parent, uint64(o)<<32|uint64(d), uint64(d)*0x9e3779b97f4a7c15+1)
				id++
			}
		}
		b = append(b, "]}"...)
	}
	return append(b, '}')
}
