package bus

import (
	"fmt"

	"github.com/kvselect/kvselect/kvwire"
	"github.com/vmihailenco/msgpack/v5"
)

// LifecycleKind says what happened to a booking. Values are wire constants.
type LifecycleKind uint8

// Lifecycle kinds, mirroring Dynamo's replica-sync events (AddRequest,
// MarkPrefillCompleted, Free). Output-block growth is never replicated.
const (
	LifecycleAdd             LifecycleKind = 1
	LifecyclePrefillComplete LifecycleKind = 2
	LifecycleFree            LifecycleKind = 3
)

// String returns the kind's name.
func (k LifecycleKind) String() string {
	if int(k) < len(lifecycleKindNames) && lifecycleKindNames[k] != "" {
		return lifecycleKindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var lifecycleKindNames = [...]string{LifecycleAdd: "add", LifecyclePrefillComplete: "prefill_complete", LifecycleFree: "free"}

// Lifecycle is one booking event of a replica, fanned out to its peers so
// their active-load accounting follows the booking replica's.
//
// Invariants of a valid event (enforced by the decoder and by
// [Lifecycle.Validate]): Kind is one of the three kinds; Add is non-nil
// exactly when Kind == LifecycleAdd (a decoder accepts and keeps Add data
// on other kinds from newer senders, but never requires it there).
//
// Wire body (array, append-only):
//
//	[ model str, group str, block_size u32, request_id str,
//	  worker u64, rank u32, kind u8, add (nil | AddData array) ]
type Lifecycle struct {
	Sender       string // replica id of the publisher; set by the Replicator
	BootID       uint64 // per-process boot id of the publisher; set by the Replicator
	Model        string
	Group        string // routing group
	BlockSize    uint32
	RequestID    string
	kvwire.Owner // the booked worker and data-parallel rank
	Kind         LifecycleKind
	Add          *AddData // present for LifecycleAdd only
}

// AddData is the admission payload of a [LifecycleAdd] event.
//
// Wire body (array, append-only):
//
//	[ tokens [u64], track_prefill bool, prefill_tokens u64,
//	  expected_output (nil | u32), lora str, isl u64, republish bool? ]
//
// ExpectedOutputTokens nil is expected_output nil (as the engine's *uint32). republish (added
// after the first layout, append-only) is written only when true, so the bytes of an ordinary
// admission are unchanged; readers that predate it skip it.
type AddData struct {
	TokenSequence        []uint64 // tracking hashes of the prompt's blocks
	TrackPrefill         bool
	PrefillTokens        uint64
	ExpectedOutputTokens *uint32 // nil when the request gave none
	LoraName             string
	ISL                  uint64 // input sequence length in tokens
	// Republish marks an anti-entropy copy of an admission the sender made earlier (not a new
	// booking): receivers may ignore it when they saw the booking freed.
	Republish bool
}

const (
	lifecycleFields = 8
	addDataFields   = 6
)

var (
	_ Message               = (*Lifecycle)(nil)
	_ msgpack.CustomEncoder = (*Lifecycle)(nil)
	_ msgpack.CustomDecoder = (*Lifecycle)(nil)
)

// Type implements [Message].
func (*Lifecycle) Type() MsgType { return TypeLifecycle }

// Origin implements [Message].
func (l *Lifecycle) Origin() (string, uint64) { return l.Sender, l.BootID }

func (l *Lifecycle) setOrigin(s string, b uint64) { l.Sender, l.BootID = s, b }

// Validate checks the kind/Add invariant.
func (l *Lifecycle) Validate() error {
	switch l.Kind {
	case LifecycleAdd:
		if l.Add == nil {
			return fmt.Errorf("%w: add event without add data", ErrMalformed)
		}
	case LifecyclePrefillComplete, LifecycleFree:
	default:
		return fmt.Errorf("%w: lifecycle kind %d", ErrMalformed, l.Kind)
	}
	return nil
}

// EncodeMsgpack implements msgpack.CustomEncoder: it writes the whole
// envelope, so msgpack.Marshal(ev) produces the same bytes as [Marshal].
func (l *Lifecycle) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeEnvelope(enc, l) }

// DecodeMsgpack implements msgpack.CustomDecoder by reading the rest of
// the input as one envelope; prefer [Decoder.DecodeInto] on hot paths.
func (l *Lifecycle) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeVia(dec, l) }

func (l *Lifecycle) encodeBody(enc *msgpack.Encoder) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(lifecycleFields); err != nil {
		return err
	}
	if err := enc.EncodeString(l.Model); err != nil {
		return err
	}
	if err := enc.EncodeString(l.Group); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(l.BlockSize)); err != nil {
		return err
	}
	if err := enc.EncodeString(l.RequestID); err != nil {
		return err
	}
	if err := enc.EncodeUint(l.Worker); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(l.Rank)); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(l.Kind)); err != nil {
		return err
	}
	if l.Add == nil {
		return enc.EncodeNil()
	}
	return l.Add.encode(enc)
}

func (a *AddData) encode(enc *msgpack.Encoder) error {
	n := addDataFields
	if a.Republish {
		n++
	}
	if err := enc.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(a.TokenSequence)); err != nil {
		return err
	}
	for _, h := range a.TokenSequence {
		if err := enc.EncodeUint(h); err != nil {
			return err
		}
	}
	if err := enc.EncodeBool(a.TrackPrefill); err != nil {
		return err
	}
	if err := enc.EncodeUint(a.PrefillTokens); err != nil {
		return err
	}
	var err error
	if a.ExpectedOutputTokens != nil {
		err = enc.EncodeUint(uint64(*a.ExpectedOutputTokens))
	} else {
		err = enc.EncodeNil()
	}
	if err != nil {
		return err
	}
	if err := enc.EncodeString(a.LoraName); err != nil {
		return err
	}
	if err := enc.EncodeUint(a.ISL); err != nil {
		return err
	}
	if a.Republish {
		return enc.EncodeBool(true)
	}
	return nil
}

// decodeBody reads the body array. Add's token slice is reused when l
// already holds one (Decoder.DecodeInto on a recycled event).
//
// Tolerance rules applied here: a body with more than lifecycleFields
// elements is from a newer sender and its extra elements are skipped; a
// body with fewer is malformed (fields are never removed from the wire).
// Integer fields reject values that overflow their Go type rather than
// truncating them, so a corrupt rank can never alias a real one.
// Every field is overwritten, so a recycled event keeps nothing stale.
func (l *Lifecycle) decodeBody(d *Decoder) error {
	n, err := d.arrayLen()
	if err != nil {
		return malformed("lifecycle body", err)
	}
	if n < lifecycleFields {
		return fmt.Errorf("%w: lifecycle body has %d fields, need %d", ErrMalformed, n, lifecycleFields)
	}
	if l.Model, err = d.str(); err != nil {
		return malformed("model", err)
	}
	if l.Group, err = d.str(); err != nil {
		return malformed("group", err)
	}
	if l.BlockSize, err = d.uint32(); err != nil {
		return malformed("block size", err)
	}
	if l.RequestID, err = d.str(); err != nil {
		return malformed("request id", err)
	}
	if l.Worker, err = d.dec.DecodeUint64(); err != nil {
		return malformed("worker", err)
	}
	if l.Rank, err = d.uint32(); err != nil {
		return malformed("rank", err)
	}
	kind, err := d.dec.DecodeUint64()
	if err != nil {
		return malformed("kind", err)
	}
	if kind > 255 {
		return fmt.Errorf("%w: lifecycle kind %d", ErrMalformed, kind)
	}
	l.Kind = LifecycleKind(kind)
	isNil, err := d.isNil()
	if err != nil {
		return malformed("add data", err)
	}
	if isNil {
		l.Add = nil
	} else {
		if l.Add == nil {
			l.Add = &AddData{}
		}
		if err := l.Add.decode(d); err != nil {
			return err
		}
	}
	if err := d.skipN(n - lifecycleFields); err != nil {
		return malformed("lifecycle trailer", err)
	}
	return l.Validate()
}

// decode reads an AddData array. A nil token sequence decodes as empty and
// expected_output nil as a nil ExpectedOutputTokens (a present one is a
// fresh pointer, never shared with an earlier decode): decoded values are
// always in the canonical form the encoder would produce, which keeps round
// trips exact.
func (a *AddData) decode(d *Decoder) error {
	n, err := d.arrayLen()
	if err != nil {
		return malformed("add data", err)
	}
	if n < addDataFields {
		return fmt.Errorf("%w: add data has %d fields, need %d", ErrMalformed, n, addDataFields)
	}
	isNil, err := d.isNil()
	if err != nil {
		return malformed("token sequence", err)
	}
	a.TokenSequence = a.TokenSequence[:0]
	if !isNil {
		cnt, err := d.arrayLen()
		if err != nil {
			return malformed("token sequence", err)
		}
		if cap(a.TokenSequence) < cnt {
			a.TokenSequence = make([]uint64, 0, cnt)
		}
		for i := 0; i < cnt; i++ {
			h, err := d.dec.DecodeUint64()
			if err != nil {
				return malformed("token hash", err)
			}
			a.TokenSequence = append(a.TokenSequence, h)
		}
	}
	if a.TrackPrefill, err = d.dec.DecodeBool(); err != nil {
		return malformed("track prefill", err)
	}
	if a.PrefillTokens, err = d.dec.DecodeUint64(); err != nil {
		return malformed("prefill tokens", err)
	}
	if isNil, err = d.isNil(); err != nil {
		return malformed("expected output", err)
	}
	a.ExpectedOutputTokens = nil
	if !isNil {
		v, err := d.uint32()
		if err != nil {
			return malformed("expected output", err)
		}
		a.ExpectedOutputTokens = &v
	}
	if a.LoraName, err = d.str(); err != nil {
		return malformed("lora name", err)
	}
	if a.ISL, err = d.dec.DecodeUint64(); err != nil {
		return malformed("isl", err)
	}
	a.Republish = false
	known := addDataFields
	if n > addDataFields {
		if a.Republish, err = d.dec.DecodeBool(); err != nil {
			return malformed("republish", err)
		}
		known++
	}
	if err := d.skipN(n - known); err != nil {
		return malformed("add data trailer", err)
	}
	return nil
}
