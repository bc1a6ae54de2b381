package bus

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// ResyncRequest asks one replica, Target, to republish its live admissions: the sender learned
// from Target's live set that it misses bookings Target holds (their admissions were lost, or
// arrived before the sender could apply them). Every replica receives it on the lifecycle
// subject; only Target acts, and only when the sender is its peer.
//
// Wire body (array, append-only):
//
//	[ target str ]
type ResyncRequest struct {
	Sender string // replica id of the publisher; set by the Replicator
	BootID uint64 // per-process boot id of the publisher; set by the Replicator
	Target string // the replica asked to republish
}

const resyncRequestFields = 1

var (
	_ Message               = (*ResyncRequest)(nil)
	_ msgpack.CustomEncoder = (*ResyncRequest)(nil)
	_ msgpack.CustomDecoder = (*ResyncRequest)(nil)
)

// Type implements [Message].
func (*ResyncRequest) Type() MsgType { return TypeResyncRequest }

// Origin implements [Message].
func (rr *ResyncRequest) Origin() (string, uint64) { return rr.Sender, rr.BootID }

func (rr *ResyncRequest) setOrigin(s string, b uint64) { rr.Sender, rr.BootID = s, b }

// EncodeMsgpack implements msgpack.CustomEncoder: it writes the whole envelope.
func (rr *ResyncRequest) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeEnvelope(enc, rr) }

// DecodeMsgpack implements msgpack.CustomDecoder by reading the rest of the input as one
// envelope.
func (rr *ResyncRequest) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeVia(dec, rr) }

func (rr *ResyncRequest) encodeBody(enc *msgpack.Encoder) error {
	if err := ValidateReplicaID(rr.Target); err != nil {
		return fmt.Errorf("%w: resync request target: %w", ErrMalformed, err)
	}
	if err := enc.EncodeArrayLen(resyncRequestFields); err != nil {
		return err
	}
	return enc.EncodeString(rr.Target)
}

// decodeBody reads the body array, skipping elements appended by newer senders.
func (rr *ResyncRequest) decodeBody(d *Decoder) error {
	n, err := d.arrayLen()
	if err != nil {
		return malformed("resync request body", err)
	}
	if n < resyncRequestFields {
		return fmt.Errorf("%w: resync request body has %d fields, need %d", ErrMalformed, n, resyncRequestFields)
	}
	if rr.Target, err = d.str(); err != nil {
		return malformed("target", err)
	}
	if err := ValidateReplicaID(rr.Target); err != nil {
		return fmt.Errorf("%w: resync request target: %w", ErrMalformed, err)
	}
	if err := d.skipN(n - resyncRequestFields); err != nil {
		return malformed("resync request trailer", err)
	}
	return nil
}
