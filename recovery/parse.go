package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// Memory: one event at a time (plus json.Decoder's buffer, bounded by Limits.MaxEventBytes).
// ParseDump never panics on any input.
func ParseDump(r io.Reader, sink Sink, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	p := &parser{cr: &countingReader{r: r, max: lim.MaxBytes, maxSpan: 2*lim.MaxEventBytes + 64<<10}, sink: sink, lim: lim}
	p.dec = json.NewDecoder(p.cr)
	p.w = wireEvent{ev: &p.ev, maxBlocks: lim.MaxBlocksPerEvent}
	err := p.document()
	p.st.Bytes = p.cr.n
	return p.st, err
}

type parser struct {
	dec     *json.Decoder
	cr      *countingReader
	sink    Sink
	lim     Limits
	st      Stats
	ev      RouterEvent
	w       wireEvent
	nEvents int // events seen in the whole document (limit accounting)
	parts   int // partitions seen
}

// skipValue is a json.Unmarshaler that accepts any value and keeps nothing.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// fatal classifies a json.Decoder error: true when the stream cannot continue (syntax error,
// truncation, reader or limit error), false for a complete value of the wrong shape.
func fatal(err error) bool {
	var ute *json.UnmarshalTypeError
	return !errors.As(err, &ute) && !errors.Is(err, errBadValue)
}

// streamErr wraps a fatal error with the right sentinel.
func streamErr(err error) error {
	switch {
	case errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: unexpected end of document", ErrMalformed)
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

func (p *parser) token() (json.Token, error) {
	p.cr.mark()
	t, err := p.dec.Token()
	if err != nil {
		return nil, streamErr(err)
	}
	return t, nil
}

func (p *parser) document() error {
	t, err := p.token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return fmt.Errorf("%w: document is not a JSON object", ErrMalformed)
	}
	for p.dec.More() {
		t, err := p.token()
		if err != nil {
			return err
		}
		key, _ := t.(string) // object keys are always strings
		if p.parts++; p.parts > p.lim.MaxPartitions {
			return fmt.Errorf("%w: more than %d partitions", ErrTooLarge, p.lim.MaxPartitions)
		}
		if err := p.partition(key); err != nil {
			return err
		}
	}
	if _, err := p.token(); err != nil { // the closing '}'
		return err
	}
	switch _, err := p.dec.Token(); {
	case err == io.EOF:
	case err != nil:
		return streamErr(err)
	default:
		return fmt.Errorf("%w: data after the document", ErrMalformed)
	}
	return nil
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

// abortFatal aborts a begun partition with a stream error and returns it.
func (p *parser) abortFatal(ps *partState, err error) error {
	if ps.began {
		ps.began = false
		p.sink.Abort(err)
	}
	return err
}

func (p *parser) partition(key string) error {
	ps := &partState{}
	part, kerr := ParseKey(key)
	ps.part = part
	if kerr != nil {
		ps.part = Partition{Model: key}
		p.reject(ps, kerr)
	}
	t, err := p.token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		if err := p.skipAfter(t); err != nil {
			return err
		}
		p.reject(ps, errors.New("partition value is not an object"))
		p.st.Rejected++
		return nil
	}
	for p.dec.More() {
		t, err := p.token()
		if err != nil {
			return p.abortFatal(ps, err)
		}
		field, _ := t.(string)
		switch field {
		case "block_size":
			var bs uint32
			if err := p.decode(&bs); err != nil {
				if fatal(err) {
					return p.abortFatal(ps, err)
				}
				p.reject(ps, fmt.Errorf("block_size: %w", err))
				continue
			}
			ps.blockSize, ps.hasBS = bs, true
		case "events":
			if err := p.events(ps); err != nil {
				return p.abortFatal(ps, err)
			}
		case "error":
			ps.errValue = true
			if err := p.decode(&skipValue{}); err != nil {
				return p.abortFatal(ps, err)
			}
		default:
			if err := p.decode(&skipValue{}); err != nil {
				return p.abortFatal(ps, err)
			}
		}
	}
	if _, err := p.token(); err != nil { // the partition's closing '}'
		return p.abortFatal(ps, err)
	}
	p.finish(ps)
	return nil
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
func (p *parser) events(ps *partState) error {
	t, err := p.token()
	if err != nil {
		return err
	}
	if t == nil { // "events": null
		if ps.rejected == nil && !ps.began {
			p.begin(ps)
		}
		return nil
	}
	if t != json.Delim('[') {
		if err := p.skipAfter(t); err != nil {
			return err
		}
		p.reject(ps, errors.New("events is not an array"))
		return nil
	}
	if ps.rejected == nil && !ps.began {
		p.begin(ps)
	}
	for p.dec.More() {
		if p.nEvents++; p.nEvents > p.lim.MaxEvents {
			return fmt.Errorf("%w: more than %d events", ErrTooLarge, p.lim.MaxEvents)
		}
		if ps.rejected != nil || ps.errValue {
			if err := p.decode(&skipValue{}); err != nil && fatal(err) {
				return err
			}
			continue
		}
		if err := p.decode(&p.w); err != nil {
			if fatal(err) {
				return err
			}
			p.reject(ps, fmt.Errorf("event %d: %w", ps.events, err))
			continue
		}
		if err := p.sink.Event(&p.ev); err != nil {
			p.reject(ps, fmt.Errorf("event %d: %w", ps.events, err))
			continue
		}
		ps.events++
		ps.blocks += len(p.ev.Blocks)
	}
	_, err = p.token() // ']'
	return err
}

func (p *parser) begin(ps *partState) {
	if err := p.sink.Begin(ps.part); err != nil {
		p.reject(ps, err)
		return
	}
	ps.began = true
}

// decode reads one value into v with the per-value byte bound armed.
func (p *parser) decode(v any) error {
	p.cr.mark()
	err := p.dec.Decode(v)
	if err != nil && fatal(err) {
		return streamErr(err)
	}
	return err
}

// skipAfter consumes the rest of a value whose first token t was already read.
func (p *parser) skipAfter(t json.Token) error {
	d, ok := t.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil // a scalar is complete
	}
	for depth := 1; depth > 0; {
		t, err := p.token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// countingReader enforces the byte limits: max over the whole document, and maxSpan bytes read
// while one value is being decoded (json.Decoder only reads while it needs more bytes to finish
// the current value, so this bounds its buffer to about one oversized value).
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
