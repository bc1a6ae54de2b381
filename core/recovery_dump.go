package core

import (
	"bufio"
	"io"
	"strconv"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/jsonw"
)

// writeDump streams the index in Dynamo's /dump recovery format (spec §11.2) to w. It serves
// both GET /dump and the NATS snapshot server.
//
// Locking: the engine lock is taken once to list the partitions, then once per partition to
// copy its index out as compact records (40 bytes per event plus 16 per block); JSON encoding and writing
// happen outside the lock through a 64 KiB buffer. A selection therefore waits at most for one
// partition's radix walk, never for encoding or a slow reader, and the transient memory is the
// largest partition's records rather than its encoded JSON.
//
// Consistency: partitions are copied one at a time (each one consistent in itself), like
// Dynamo's weakly consistent dump.
func (s *Service) writeDump(w io.Writer) error {
	s.mu.Lock()
	keys := s.eng.DumpKeys()
	s.mu.Unlock()
	bw := bufio.NewWriterSize(w, 64<<10)
	var recs []engine.DumpRecord
	var blocks []engine.RecoveredBlock
	var buf []byte
	if err := bw.WriteByte('{'); err != nil {
		return err
	}
	first := true
	for _, k := range keys {
		var bs uint32
		var ok bool
		s.mu.Lock()
		recs, blocks, bs, ok = s.eng.DumpPartitionRecords(k, recs[:0], blocks[:0])
		s.mu.Unlock()
		if !ok {
			continue // removed since the listing
		}
		buf = buf[:0]
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = jsonw.AppendString(buf, k.DumpKey())
		buf = append(buf, `:{"block_size":`...)
		buf = strconv.AppendUint(buf, uint64(bs), 10)
		buf = append(buf, `,"events":[`...)
		for i := range recs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = engine.AppendDumpRecord(buf, uint64(i), &recs[i], blocks)
			if len(buf) >= 32<<10 {
				if _, err := bw.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		buf = append(buf, "]}"...)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	if err := bw.WriteByte('}'); err != nil {
		return err
	}
	return bw.Flush()
}
