package bus

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// LiveSet announces which bookings its sender holds in one partition at one instant: the
// request ids of every live booking the sender admitted itself there. A peer that mirrors a
// booking of the sender in that partition which is not in the set missed its free (lost while a
// connection was down, or dropped by a full queue) and can release it.
//
// A set too large for one message travels as Chunks messages sharing SetID (Chunk counts from
// 0); a receiver applies a set only once it has every chunk, so a lost chunk only delays the
// repair to the next announcement. The sender publishes all chunks of a set back to back, in
// order with its lifecycle events on the same subject, so every admission a receiver has seen
// before the set's first chunk is either in the set or was freed before it was built.
//
// Invariants of a valid set (enforced by the decoder and [LiveSet.Validate]): Chunks ≥ 1 and
// Chunk < Chunks.
//
// Wire body (array, append-only):
//
//	[ model str, group str, set_id u64, chunk u32, chunks u32, ids [str] ]
type LiveSet struct {
	Sender string // replica id of the publisher; set by the Replicator
	BootID uint64 // per-process boot id of the publisher; set by the Replicator
	Model  string
	Group  string // routing group
	SetID  uint64
	Chunk  uint32
	Chunks uint32
	IDs    []string
}

const liveSetFields = 6

var (
	_ Message               = (*LiveSet)(nil)
	_ msgpack.CustomEncoder = (*LiveSet)(nil)
	_ msgpack.CustomDecoder = (*LiveSet)(nil)
)

// Type implements [Message].
func (*LiveSet) Type() MsgType { return TypeLiveSet }

// Origin implements [Message].
func (ls *LiveSet) Origin() (string, uint64) { return ls.Sender, ls.BootID }

func (ls *LiveSet) setOrigin(s string, b uint64) { ls.Sender, ls.BootID = s, b }

// Validate checks the chunk invariant.
func (ls *LiveSet) Validate() error {
	if ls.Chunks == 0 || ls.Chunk >= ls.Chunks {
		return fmt.Errorf("%w: live set chunk %d of %d", ErrMalformed, ls.Chunk, ls.Chunks)
	}
	return nil
}

// EncodeMsgpack implements msgpack.CustomEncoder: it writes the whole envelope.
func (ls *LiveSet) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeEnvelope(enc, ls) }

// DecodeMsgpack implements msgpack.CustomDecoder by reading the rest of the input as one
// envelope.
func (ls *LiveSet) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeVia(dec, ls) }

func (ls *LiveSet) encodeBody(enc *msgpack.Encoder) error {
	if err := ls.Validate(); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(liveSetFields); err != nil {
		return err
	}
	if err := enc.EncodeString(ls.Model); err != nil {
		return err
	}
	if err := enc.EncodeString(ls.Group); err != nil {
		return err
	}
	if err := enc.EncodeUint(ls.SetID); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(ls.Chunk)); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(ls.Chunks)); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(ls.IDs)); err != nil {
		return err
	}
	for _, id := range ls.IDs {
		if err := enc.EncodeString(id); err != nil {
			return err
		}
	}
	return nil
}

// decodeBody reads the body array, skipping elements appended by newer senders. A nil id list
// decodes as empty. Every field is overwritten.
func (ls *LiveSet) decodeBody(d *Decoder) error {
	n, err := d.arrayLen()
	if err != nil {
		return malformed("live set body", err)
	}
	if n < liveSetFields {
		return fmt.Errorf("%w: live set body has %d fields, need %d", ErrMalformed, n, liveSetFields)
	}
	if ls.Model, err = d.str(); err != nil {
		return malformed("model", err)
	}
	if ls.Group, err = d.str(); err != nil {
		return malformed("group", err)
	}
	if ls.SetID, err = d.dec.DecodeUint64(); err != nil {
		return malformed("set id", err)
	}
	if ls.Chunk, err = d.uint32(); err != nil {
		return malformed("chunk", err)
	}
	if ls.Chunks, err = d.uint32(); err != nil {
		return malformed("chunks", err)
	}
	isNil, err := d.isNil()
	if err != nil {
		return malformed("ids", err)
	}
	ls.IDs = ls.IDs[:0]
	if !isNil {
		cnt, err := d.arrayLen()
		if err != nil {
			return malformed("ids", err)
		}
		if cap(ls.IDs) < cnt {
			ls.IDs = make([]string, 0, cnt)
		}
		for range cnt {
			id, err := d.str()
			if err != nil {
				return malformed("id", err)
			}
			ls.IDs = append(ls.IDs, id)
		}
	}
	if err := d.skipN(n - liveSetFields); err != nil {
		return malformed("live set trailer", err)
	}
	return ls.Validate()
}
