package bus

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Affinity is a session-affinity binding replicated between replicas
// (Dynamo's session-affinity topic). Sessions are implemented later; the
// codec is fixed now so the wire is stable when they arrive.
//
// Version order: (Sequence, Writer) compared lexicographically, higher wins;
// Sequence starts at the writer's wall-clock nanoseconds and Writer is the
// writer's process id. The codec carries them, it does not interpret them.
//
// Wire body (array, append-only):
//
//	[ model str, group str, session_id str, worker u64,
//	  rank (nil | u32), sequence u64, writer u64 ]
//
// HasRank is not a wire field: rank is nil when false.
type Affinity struct {
	Sender    string // replica id of the publisher; set by the Replicator
	BootID    uint64 // per-process boot id of the publisher; set by the Replicator
	Model     string
	Group     string
	SessionID string
	Worker    uint64
	Rank      uint32 // meaningful only when HasRank
	HasRank   bool
	Sequence  uint64
	Writer    uint64
}

const affinityFields = 7

var (
	_ Message               = (*Affinity)(nil)
	_ msgpack.CustomEncoder = (*Affinity)(nil)
	_ msgpack.CustomDecoder = (*Affinity)(nil)
)

// Type implements [Message].
func (*Affinity) Type() MsgType { return TypeAffinity }

// Origin implements [Message].
func (a *Affinity) Origin() (string, uint64) { return a.Sender, a.BootID }

func (a *Affinity) setOrigin(s string, b uint64) { a.Sender, a.BootID = s, b }

// EncodeMsgpack implements msgpack.CustomEncoder (whole envelope).
func (a *Affinity) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeEnvelope(enc, a) }

// DecodeMsgpack implements msgpack.CustomDecoder (whole envelope).
func (a *Affinity) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeVia(dec, a) }

func (a *Affinity) encodeBody(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(affinityFields); err != nil {
		return err
	}
	if err := enc.EncodeString(a.Model); err != nil {
		return err
	}
	if err := enc.EncodeString(a.Group); err != nil {
		return err
	}
	if err := enc.EncodeString(a.SessionID); err != nil {
		return err
	}
	if err := enc.EncodeUint(a.Worker); err != nil {
		return err
	}
	var err error
	if a.HasRank {
		err = enc.EncodeUint(uint64(a.Rank))
	} else {
		err = enc.EncodeNil()
	}
	if err != nil {
		return err
	}
	if err := enc.EncodeUint(a.Sequence); err != nil {
		return err
	}
	return enc.EncodeUint(a.Writer)
}

func (a *Affinity) decodeBody(d *Decoder) error {
	n, err := d.arrayLen()
	if err != nil {
		return malformed("affinity body", err)
	}
	if n < affinityFields {
		return fmt.Errorf("%w: affinity body has %d fields, need %d", ErrMalformed, n, affinityFields)
	}
	if a.Model, err = d.str(); err != nil {
		return malformed("model", err)
	}
	if a.Group, err = d.str(); err != nil {
		return malformed("group", err)
	}
	if a.SessionID, err = d.str(); err != nil {
		return malformed("session id", err)
	}
	if a.Worker, err = d.dec.DecodeUint64(); err != nil {
		return malformed("worker", err)
	}
	isNil, err := d.isNil()
	if err != nil {
		return malformed("rank", err)
	}
	a.HasRank, a.Rank = !isNil, 0
	if !isNil {
		if a.Rank, err = d.uint32(); err != nil {
			return malformed("rank", err)
		}
	}
	if a.Sequence, err = d.dec.DecodeUint64(); err != nil {
		return malformed("sequence", err)
	}
	if a.Writer, err = d.dec.DecodeUint64(); err != nil {
		return malformed("writer", err)
	}
	if err := d.skipN(n - affinityFields); err != nil {
		return malformed("affinity trailer", err)
	}
	return nil
}

// decodeVia adapts the package decoder to msgpack.CustomDecoder: it takes
// the next raw value from dec (msgpack's own skipper, which has no depth
// bound; use [Decoder] for untrusted bytes) and decodes it as m.
func decodeVia(dec *msgpack.Decoder, m Message) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return malformed(m.Type().String(), err)
	}
	return NewDecoder().DecodeInto(raw, m)
}
