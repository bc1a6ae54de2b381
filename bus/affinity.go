package bus

import (
	"fmt"

	"github.com/kvselect/kvselect/kvwire"
	"github.com/vmihailenco/msgpack/v5"
)

// Affinity is a session-affinity binding replicated between replicas
// (Dynamo's session-affinity topic), in one of two shapes:
//
//   - a worker binding (Target empty): session → (worker, rank) in the
//     partition (Model, Group), merged into the engine's affinity tables;
//   - a target binding (Target set): an AIBrix session (Model, SessionID)
//     → candidate "namespace/pod" and Port, valid for TTLMillis after the
//     receiver applies it. The candidate need not be a registered worker,
//     so Worker and Rank are unused (zero, no rank) in this shape.
//
// Version order: (Sequence, Writer) compared lexicographically, higher wins;
// Sequence starts at the writer's wall-clock nanoseconds and Writer is the
// writer's process id. The codec carries them, it does not interpret them.
//
// Wire body (array, append-only):
//
//	[ model str, group str, session_id str, worker u64,
//	  rank (nil | u32), sequence u64, writer u64,
//	  target str, port u32, ttl_millis u32 ]     ← optional trailer
//
// Layout history (v1 envelope throughout): the first seven fields are the
// original body. The three trailing fields were appended for target
// bindings. An encoder writes them only when Target is non-empty, so a
// worker binding's bytes are unchanged (the affinity_rank/affinity_norank
// goldens) and a replica built before the trailer skips it. A decoder
// accepts 7 fields or more and reads each trailing field that is present
// (8 → target, 9 → port, 10 → ttl_millis; later fields are skipped); when
// the decoded Target is empty it zeroes Port and TTLMillis, so decoding
// always yields the canonical form that re-encodes to the same message.
//
// HasRank is not a wire field: rank is nil when false.
type Affinity struct {
	Sender       string // replica id of the publisher; set by the Replicator
	BootID       uint64 // per-process boot id of the publisher; set by the Replicator
	Model        string
	Group        string
	SessionID    string
	kvwire.Owner // the bound worker and rank; Rank is meaningful only when HasRank
	HasRank      bool
	Sequence     uint64
	Writer       uint64

	// Target, Port and TTLMillis form the optional trailer (see the layout
	// above). Port and TTLMillis are meaningful only when Target is set: the
	// encoder omits all three when it is empty.
	Target    string
	Port      uint32
	TTLMillis uint32
}

const (
	affinityFields       = 7  // fields every decoder requires
	affinityTargetFields = 10 // fields written when Target is set
)

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
	n := affinityFields
	if a.Target != "" {
		n = affinityTargetFields
	}
	if err := enc.EncodeArrayLen(n); err != nil {
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
	if err := enc.EncodeUint(a.Writer); err != nil {
		return err
	}
	if a.Target == "" {
		return nil
	}
	if err := enc.EncodeString(a.Target); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(a.Port)); err != nil {
		return err
	}
	return enc.EncodeUint(uint64(a.TTLMillis))
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
	if err := a.decodeTrailer(d, n); err != nil {
		return err
	}
	if err := d.skipN(n - min(n, affinityTargetFields)); err != nil {
		return malformed("affinity trailer", err)
	}
	return nil
}

// decodeTrailer reads the optional target fields present in an n-field
// body (n >= affinityFields) and canonicalises: every trailer field absent
// from the wire is zero, and Port/TTLMillis are zero when Target is empty.
// It overwrites all three fields, so a recycled Affinity keeps nothing stale.
func (a *Affinity) decodeTrailer(d *Decoder, n int) error {
	a.Target, a.Port, a.TTLMillis = "", 0, 0
	var err error
	if n > affinityFields {
		if a.Target, err = d.str(); err != nil {
			return malformed("target", err)
		}
	}
	if n > affinityFields+1 {
		if a.Port, err = d.uint32(); err != nil {
			return malformed("port", err)
		}
	}
	if n > affinityFields+2 {
		if a.TTLMillis, err = d.uint32(); err != nil {
			return malformed("ttl", err)
		}
	}
	if a.Target == "" {
		a.Port, a.TTLMillis = 0, 0
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
