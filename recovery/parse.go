package recovery

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// ParseDump streams a /dump document (spec §11.2) from r into sink:
//
//	{"<model>:<routing_group>": {"block_size": N, "events": [RouterEvent, ...]}, ...}
//
// Accepted variations: "block_size" before or after "events"; a partition value
// {"error": "..."} (the peer could not dump it) is skipped and counted; unknown members are
// ignored at every level; "events": null is an empty partition; a partition with no "events"
// member is skipped. Keys are split at the first ':'.
//
// Per-partition problems (see the package doc) reject that partition alone and are reported
// to the Sink; stream-breaking problems return an error wrapping ErrMalformed or ErrTooLarge,
// after calling Abort for a partition in progress. The returned Stats are valid either way.
//
// Memory: one event at a time (plus the jsontext.Decoder's buffer, about one token, bounded by
// Limits.MaxEventBytes). ParseDump never panics on any input. Duplicate names and invalid UTF-8
// are accepted, as the encoding/json-based parser this jsontext walk replaced accepted them.
//
// Speed: against the hand-written scanner over encoding/json's Decoder it replaced,
// BenchmarkParseDump (100k events, 24 MB) went from 1016 ms to 274 ms per op (23 to 84 MiB/s),
// 9 KiB allocated per document.
func ParseDump(r io.Reader, sink Sink, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	p := &parser{cr: &countingReader{r: r, max: lim.MaxBytes, maxSpan: 2*lim.MaxEventBytes + 64<<10}, sink: sink, lim: lim}
	p.d = jsontext.NewDecoder(p.cr, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	p.w = walk{d: p.d, maxBlocks: lim.MaxBlocksPerEvent}
	err := p.document()
	if err != nil && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrMalformed) {
		err = streamErr(err)
	}
	p.st.Bytes = p.cr.n
	return p.st, err
}

type parser struct {
	d       *jsontext.Decoder
	cr      *countingReader
	w       walk
	sink    Sink
	lim     Limits
	st      Stats
	ev      RouterEvent
	nEvents int // events seen in the whole document (limit accounting)
	parts   int // partitions seen
}

// streamErr wraps a decoder or reader error with the right sentinel.
func streamErr(err error) error {
	switch {
	case errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: unexpected end of document", ErrMalformed)
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

func (p *parser) document() error {
	if p.d.PeekKind() != '{' {
		if _, err := p.d.ReadToken(); err != nil {
			return err
		}
		return fmt.Errorf("%w: document is not a JSON object", ErrMalformed)
	}
	err := p.w.object(func(key []byte) error {
		p.cr.mark()
		if p.parts++; p.parts > p.lim.MaxPartitions {
			return fmt.Errorf("%w: more than %d partitions", ErrTooLarge, p.lim.MaxPartitions)
		}
		return p.partition(string(key))
	})
	if err != nil {
		return err
	}
	switch _, err := p.d.ReadToken(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: data after the document", ErrMalformed)
}

// partState is the parse state of one partition value.
type partState struct {
	part      Partition
	began     bool  // Begin returned nil; End or Abort still owed
	rejected  error // first per-partition problem
	blockSize uint32
	hasBS     bool
	errValue  bool // the peer reported {"error": ...}
	events    int
	blocks    int
}

// reject records a per-partition problem and aborts the partition if it had begun.
func (p *parser) reject(ps *partState, err error) {
	if ps.rejected != nil {
		return
	}
	ps.rejected = fmt.Errorf("%w: %s: %w", ErrPartition, ps.part, err)
	if ps.began {
		ps.began = false
		p.sink.Abort(ps.rejected)
	}
}

// partition reads one partition value. Every error it returns breaks the stream; a begun
// partition is aborted with it.
func (p *parser) partition(key string) error {
	ps := &partState{}
	err := p.partitionValue(ps, key)
	if err != nil && ps.began {
		ps.began = false
		p.sink.Abort(streamErr(err))
	}
	return err
}

func (p *parser) partitionValue(ps *partState, key string) error {
	part, kerr := ParseKey(key)
	ps.part = part
	if kerr != nil {
		ps.part = Partition{Model: key}
		p.reject(ps, kerr)
	}
	err := p.w.object(func(field []byte) (err error) {
		p.cr.mark()
		switch string(field) {
		case "block_size":
			var bs uint64
			if bs, err = p.w.uint(32); err == nil {
				ps.blockSize, ps.hasBS = uint32(bs), true
			}
		case "events":
			err = p.events(ps)
		case "error":
			ps.errValue = true
			err = p.d.SkipValue()
		default:
			err = p.d.SkipValue()
		}
		if errors.Is(err, errBadValue) {
			p.reject(ps, fmt.Errorf("%s: %w", field, err))
			return nil
		}
		return err
	})
	if errors.Is(err, errBadValue) { // the value was not an object
		p.reject(ps, errors.New("partition value is not an object"))
		p.st.Rejected++
		return nil
	}
	if err == nil {
		p.finish(ps)
	}
	return err
}

// finish settles a partition whose value was read completely.
func (p *parser) finish(ps *partState) {
	switch {
	case ps.errValue:
		p.st.Errored++
		if ps.began {
			ps.began = false
			p.sink.Abort(fmt.Errorf("%w: %s: the peer reported an error for it", ErrPartition, ps.part))
		}
	case ps.rejected != nil:
		p.st.Rejected++
	case !ps.began:
		// No events member: nothing to recover for this key.
	case !ps.hasBS || ps.blockSize == 0:
		p.reject(ps, errors.New("missing or zero block_size"))
		p.st.Rejected++
	default:
		ps.began = false
		if err := p.sink.End(ps.blockSize); err != nil {
			p.st.Rejected++
			return
		}
		p.st.Partitions++
		p.st.Events += ps.events
		p.st.Blocks += ps.blocks
	}
}

// events reads the "events" array, delivering each event unless the partition is rejected.
// An event of the wrong shape rejects the partition; the walk steps over the event's rest.
func (p *parser) events(ps *partState) error {
	if p.w.null() { // "events": null
		if ps.rejected == nil && !ps.began {
			p.begin(ps)
		}
		return nil
	}
	if p.d.PeekKind() == '[' && ps.rejected == nil && !ps.began {
		p.begin(ps)
	}
	return p.w.array(func() error {
		p.cr.mark()
		if p.nEvents++; p.nEvents > p.lim.MaxEvents {
			return fmt.Errorf("%w: more than %d events", ErrTooLarge, p.lim.MaxEvents)
		}
		if ps.rejected != nil || ps.errValue {
			return p.d.SkipValue()
		}
		depth := p.d.StackDepth()
		err := p.w.event(&p.ev)
		if errors.Is(err, errBadValue) {
			p.reject(ps, fmt.Errorf("event %d: %w", ps.events, err))
			for err = nil; err == nil && p.d.StackDepth() > depth; {
				_, err = p.d.ReadToken()
			}
			return err
		}
		if err != nil {
			return err
		}
		if err := p.sink.Event(&p.ev); err != nil {
			p.reject(ps, fmt.Errorf("event %d: %w", ps.events, err))
			return nil
		}
		ps.events++
		ps.blocks += len(p.ev.Blocks)
		return nil
	})
}

func (p *parser) begin(ps *partState) {
	if err := p.sink.Begin(ps.part); err != nil {
		p.reject(ps, err)
		return
	}
	ps.began = true
}

// countingReader enforces the byte limits: max over the whole document, and maxSpan bytes read
// since the parser last marked (before each partition, member and event), so the decoder's
// buffer never holds much more than one oversized value.
type countingReader struct {
	r       io.Reader
	n       int64 // bytes read so far
	max     int64
	markAt  int64
	maxSpan int64
}

func (c *countingReader) mark() { c.markAt = c.n }

func (c *countingReader) Read(b []byte) (int, error) {
	if c.n > c.max {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, c.max)
	}
	if rest := c.max - c.n + 1; int64(len(b)) > rest {
		b = b[:rest]
	}
	n, err := c.r.Read(b)
	c.n += int64(n)
	if c.n > c.max {
		return n, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, c.max)
	}
	if c.n-c.markAt > c.maxSpan {
		return n, fmt.Errorf("%w: one value spans more than %d bytes", ErrTooLarge, c.maxSpan)
	}
	return n, err
}
