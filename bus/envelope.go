package bus

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Envelope wire format, version 1.
//
// Every message on a kvselect subject is one msgpack array:
//
//	[ version uint, type uint, sender str, boot_id uint64, body ]
//
// followed by nothing. body is type specific (see lifecycle.go, affinity.go,
// heartbeat.go). Compatibility rules, which every decoder in this package
// follows and which future versions must keep:
//
//   - Positions never change meaning. New fields are only appended, to the
//     envelope array or to a body array; decoders skip trailing elements
//     they do not know (unlike msgpack's as_array, which rejects them).
//   - Map-encoded bodies (cold types) ignore unknown keys.
//   - A reader accepts any version >= 1. Version 0 is malformed.
//   - An unknown message type is reported as [ErrUnknownType] so receivers
//     can count it separately from corruption.
//
// Integers are written in their most compact msgpack form (the golden
// files in testdata/ pin the exact bytes).
const (
	envelopeFields = 5 // fields a v1 reader requires in the envelope array

	// maxSkipDepth bounds nesting while skipping unknown trailing values, so
	// a hostile payload of nested one-byte arrays cannot drive recursion
	// depth to the size of the payload.
	maxSkipDepth = 16
)

// MsgType identifies the body carried in an envelope.
type MsgType uint8

// Message types. Values are wire constants: never renumber.
const (
	TypeLifecycle MsgType = 1
	TypeAffinity  MsgType = 2
	TypeHeartbeat MsgType = 3
	TypeLiveSet   MsgType = 4
	// TypeResyncRequest asks one replica to republish its admissions.
	TypeResyncRequest MsgType = 5
)

// msgKind registers one message type: its name, its stream (the subject family it is published
// on and counted under: kindLifecycle, kindAffinity or kindMembers) and a constructor for Decode.
type msgKind struct {
	name, stream string
	new          func() Message
}

// msgKinds is indexed by wire type; every Message's Type is registered (TestMsgKinds). Adding a
// NATS message type is a MsgType constant, its body type in its own file, and one entry here:
// String, Decode, DecodeInto and the publisher's subject and counters all read this table.
var msgKinds = [...]msgKind{
	TypeLifecycle:     {"lifecycle", kindLifecycle, func() Message { return new(Lifecycle) }},
	TypeAffinity:      {"affinity", kindAffinity, func() Message { return new(Affinity) }},
	TypeHeartbeat:     {"heartbeat", kindMembers, func() Message { return new(Heartbeat) }},
	TypeLiveSet:       {"live_set", kindLifecycle, func() Message { return new(LiveSet) }},
	TypeResyncRequest: {"resync_request", kindLifecycle, func() Message { return new(ResyncRequest) }},
}

// kind returns t's registration, or nil for a type this build does not know.
func (t MsgType) kind() *msgKind {
	if int(t) < len(msgKinds) && msgKinds[t].new != nil {
		return &msgKinds[t]
	}
	return nil
}

// String returns the lower-case name of t.
func (t MsgType) String() string {
	if k := t.kind(); k != nil {
		return k.name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Decoding errors. Every decode failure wraps exactly one of these.
var (
	// ErrMalformed means the bytes are not a valid envelope of a known type.
	ErrMalformed = errors.New("bus: malformed envelope")
	// ErrUnknownType means a well-formed envelope of a type this build does
	// not know (sent by a newer replica).
	ErrUnknownType = errors.New("bus: unknown envelope type")
	// ErrWrongType means DecodeX was given an envelope of another type.
	ErrWrongType = errors.New("bus: unexpected envelope type")
)

// Message is implemented by the envelope payload types ([*Lifecycle],
// [*Affinity], [*Heartbeat], [*LiveSet], [*ResyncRequest]). The unexported methods keep the set closed.
type Message interface {
	// Type returns the wire type of the message.
	Type() MsgType
	// Origin returns the sender replica id and its boot id.
	Origin() (sender string, bootID uint64)

	setOrigin(sender string, bootID uint64)
	encodeBody(enc *msgpack.Encoder) error
	decodeBody(d *Decoder) error
}

// Encoder turns messages into envelope bytes, reusing one buffer.
//
// Concurrency: an Encoder is not safe for concurrent use; give each
// publishing goroutine its own.
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an Encoder with an empty buffer.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// Encode writes m's envelope and returns the bytes. The returned slice is
// owned by the Encoder and valid only until the next call to Encode; NATS
// Publish copies it, so publishing it directly is fine.
func (e *Encoder) Encode(m Message) ([]byte, error) {
	e.buf.Reset()
	if err := encodeEnvelope(e.enc, m); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// Marshal returns m's envelope in a freshly allocated slice.
func Marshal(m Message) ([]byte, error) {
	b, err := NewEncoder().Encode(m)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

func encodeEnvelope(enc *msgpack.Encoder, m Message) error {
	sender, boot := m.Origin()
	if err := ValidateReplicaID(sender); err != nil {
		return fmt.Errorf("bus: encode %s: %w", m.Type(), err)
	}
	if err := enc.EncodeArrayLen(envelopeFields); err != nil {
		return err
	}
	if err := enc.EncodeUint(WireVersion); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(m.Type())); err != nil {
		return err
	}
	if err := enc.EncodeString(sender); err != nil {
		return err
	}
	if err := enc.EncodeUint(boot); err != nil {
		return err
	}
	return m.encodeBody(enc)
}

// Decoder parses envelope bytes. It reuses its reader between calls.
//
// Concurrency: not safe for concurrent use; NATS runs the handler of one
// subscription serially, so one Decoder per subscription suffices.
type Decoder struct {
	data []byte // the envelope being decoded; strings are copied out of it
	rd   bytes.Reader
	dec  *msgpack.Decoder
}

// NewDecoder returns a ready Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}

// Header is the part of an envelope common to every type.
type Header struct {
	Version uint64
	Type    MsgType
	Sender  string
	BootID  uint64
	// extra is the number of envelope elements after body that this build
	// does not know and must skip.
	extra int
}

// Decode parses an envelope of any known type into a new message.
// The message owns all its memory (nothing aliases data).
func (d *Decoder) Decode(data []byte) (Message, error) {
	h, err := d.header(data)
	if err != nil {
		return nil, err
	}
	k := h.Type.kind()
	if k == nil {
		return nil, fmt.Errorf("%w: %d from %q", ErrUnknownType, h.Type, h.Sender)
	}
	m := k.new()
	if err := d.body(h, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInto parses an envelope that must be of m's type into m, reusing
// m's slices where it can. On error m is left in an unspecified state.
func (d *Decoder) DecodeInto(data []byte, m Message) error {
	h, err := d.header(data)
	if err != nil {
		return err
	}
	if h.Type != m.Type() {
		if h.Type.kind() == nil {
			return fmt.Errorf("%w: %d from %q", ErrUnknownType, h.Type, h.Sender)
		}
		return fmt.Errorf("%w: got %s, want %s", ErrWrongType, h.Type, m.Type())
	}
	return d.body(h, m)
}

// DecodeEnvelope parses data with a throw-away [Decoder]. Hot paths should
// keep a Decoder instead.
func DecodeEnvelope(data []byte) (Message, error) {
	return NewDecoder().Decode(data)
}

func (d *Decoder) header(data []byte) (Header, error) {
	d.data = data
	d.rd.Reset(data)
	d.dec.Reset(&d.rd)
	n, err := d.arrayLen()
	if err != nil {
		return Header{}, malformed("envelope", err)
	}
	if n < envelopeFields {
		return Header{}, fmt.Errorf("%w: envelope has %d fields, need %d", ErrMalformed, n, envelopeFields)
	}
	var h Header
	if h.Version, err = d.dec.DecodeUint64(); err != nil {
		return Header{}, malformed("version", err)
	}
	if h.Version < 1 {
		return Header{}, fmt.Errorf("%w: version %d", ErrMalformed, h.Version)
	}
	t, err := d.dec.DecodeUint64()
	if err != nil {
		return Header{}, malformed("type", err)
	}
	if t > 255 {
		return Header{}, fmt.Errorf("%w: type %d out of range", ErrMalformed, t)
	}
	h.Type = MsgType(t)
	if h.Sender, err = d.str(); err != nil {
		return Header{}, malformed("sender", err)
	}
	if err := ValidateReplicaID(h.Sender); err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if h.BootID, err = d.dec.DecodeUint64(); err != nil {
		return Header{}, malformed("boot id", err)
	}
	h.extra = n - envelopeFields
	return h, nil
}

func (d *Decoder) body(h Header, m Message) error {
	m.setOrigin(h.Sender, h.BootID)
	if err := m.decodeBody(d); err != nil {
		return err
	}
	if err := d.skipN(h.extra); err != nil {
		return malformed("envelope trailer", err)
	}
	if d.rd.Len() != 0 {
		return fmt.Errorf("%w: %d trailing bytes after envelope", ErrMalformed, d.rd.Len())
	}
	return nil
}

func malformed(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
}

// arrayLen reads an array header and bounds it by the bytes left: every
// element takes at least one byte, so a larger count is a lie that would
// otherwise size an allocation. nil is rejected.
func (d *Decoder) arrayLen() (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("nil where an array is required")
	}
	if n > d.rd.Len() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.rd.Len())
	}
	return n, nil
}

// mapLen is arrayLen for maps (two values per entry).
func (d *Decoder) mapLen() (int, error) {
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("nil where a map is required")
	}
	if n > d.rd.Len()/2 {
		return 0, fmt.Errorf("map of %d entries in %d bytes", n, d.rd.Len())
	}
	return n, nil
}

// isNil consumes a nil if one is next and reports whether it did.
func (d *Decoder) isNil() (bool, error) {
	c, err := d.dec.PeekCode()
	if err != nil {
		return false, err
	}
	if c != msgpcode.Nil {
		return false, nil
	}
	return true, d.dec.DecodeNil()
}

// str decodes a string (or bin, or nil as ""). The length is checked
// against the bytes left before anything is allocated, and the string is
// copied straight out of the input (one allocation).
func (d *Decoder) str() (string, error) {
	n, err := d.strLen()
	if err != nil || n <= 0 {
		return "", err
	}
	off := len(d.data) - d.rd.Len()
	s := string(d.data[off : off+n])
	if _, err := d.rd.Seek(int64(n), io.SeekCurrent); err != nil {
		return "", err
	}
	return s, nil
}

// strLen reads a str/bin header and bounds its length by the input left.
func (d *Decoder) strLen() (int, error) {
	n, err := d.dec.DecodeBytesLen()
	if err != nil {
		return 0, err
	}
	if n > d.rd.Len() {
		return 0, fmt.Errorf("string of %d bytes in %d bytes", n, d.rd.Len())
	}
	return n, nil
}

// uint32 decodes an unsigned integer that must fit in 32 bits.
func (d *Decoder) uint32() (uint32, error) {
	v, err := d.dec.DecodeUint64()
	if err != nil {
		return 0, err
	}
	if v > 1<<32-1 {
		return 0, fmt.Errorf("value %d overflows uint32", v)
	}
	return uint32(v), nil
}

// skipN skips n values of any type.
func (d *Decoder) skipN(n int) error {
	for i := 0; i < n; i++ {
		if err := d.skip(0); err != nil {
			return err
		}
	}
	return nil
}

// skip skips one value, descending into arrays and maps with a depth bound
// (msgpack's own Skip recurses without one).
func (d *Decoder) skip(depth int) error {
	if depth > maxSkipDepth {
		return errors.New("unknown value nested too deeply")
	}
	c, err := d.dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.arrayLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedString(c) || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32 ||
		c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32:
		n, err := d.strLen()
		if err != nil || n <= 0 {
			return err
		}
		_, err = d.rd.Seek(int64(n), io.SeekCurrent)
		return err
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < 2*n; i++ {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	return d.dec.Skip()
}
