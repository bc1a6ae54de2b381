package bus

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Heartbeat announces that a replica is alive (Leaving false) or is shutting
// down gracefully (Leaving true). It is a cold message (one per replica per
// interval), so its body is a map with short keys: new keys can be added
// freely and old readers ignore them.
//
// Wire body (map; unknown keys ignored, missing keys keep zero values):
//
//	{ "h": http_addr str, "l": leaving bool, "t": started_at i64 (unix nanos),
//	  "a": aliases [str] (optional, added after v1 shipped; see aliases.go) }
//
// "a" is written only when the replica has aliases, so a heartbeat without them keeps the
// released bytes (testdata/golden/heartbeat.hex); readers that predate it skip the key.
type Heartbeat struct {
	Sender    string // replica id; set by the Replicator
	BootID    uint64 // per-process boot id; set by the Replicator
	HTTPAddr  string // where the replica serves HTTP (for /dump recovery); may be empty
	StartedAt int64  // process start, unix nanoseconds; orders boots of one id
	Leaving   bool   // graceful departure: remove at once, don't wait for expiry
	// Aliases are the other ids clients may use for this replica (aliases.go); at most
	// MaxAliases, each a valid replica id. Decoding reuses the slice.
	Aliases []string
}

const (
	hbKeyHTTPAddr  = "h"
	hbKeyStartedAt = "t"
	hbKeyLeaving   = "l"
	hbKeyAliases   = "a"
	heartbeatKeys  = 3 // without aliases
)

var (
	_ Message               = (*Heartbeat)(nil)
	_ msgpack.CustomEncoder = (*Heartbeat)(nil)
	_ msgpack.CustomDecoder = (*Heartbeat)(nil)
)

// Type implements [Message].
func (*Heartbeat) Type() MsgType { return TypeHeartbeat }

// Origin implements [Message].
func (h *Heartbeat) Origin() (string, uint64) { return h.Sender, h.BootID }

func (h *Heartbeat) setOrigin(s string, b uint64) { h.Sender, h.BootID = s, b }

// EncodeMsgpack implements msgpack.CustomEncoder (whole envelope).
func (h *Heartbeat) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeEnvelope(enc, h) }

// DecodeMsgpack implements msgpack.CustomDecoder (whole envelope).
func (h *Heartbeat) DecodeMsgpack(dec *msgpack.Decoder) error { return decodeVia(dec, h) }

// encodeBody writes keys in sorted order so the bytes are deterministic
// (the golden test relies on it) and equal msgpack's SetSortMapKeys output.
func (h *Heartbeat) encodeBody(enc *msgpack.Encoder) error {
	n := heartbeatKeys
	if len(h.Aliases) > 0 {
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	if len(h.Aliases) > 0 {
		if err := encodeAliases(enc, h.Aliases); err != nil {
			return err
		}
	}
	if err := enc.EncodeString(hbKeyHTTPAddr); err != nil {
		return err
	}
	if err := enc.EncodeString(h.HTTPAddr); err != nil {
		return err
	}
	if err := enc.EncodeString(hbKeyLeaving); err != nil {
		return err
	}
	if err := enc.EncodeBool(h.Leaving); err != nil {
		return err
	}
	if err := enc.EncodeString(hbKeyStartedAt); err != nil {
		return err
	}
	return enc.EncodeInt(h.StartedAt)
}

func (h *Heartbeat) decodeBody(d *Decoder) error {
	n, err := d.mapLen()
	if err != nil {
		return malformed("heartbeat body", err)
	}
	h.HTTPAddr, h.StartedAt, h.Leaving, h.Aliases = "", 0, false, h.Aliases[:0]
	for i := 0; i < n; i++ {
		key, err := d.str()
		if err != nil {
			return malformed("heartbeat key", err)
		}
		switch key {
		case hbKeyHTTPAddr:
			h.HTTPAddr, err = d.str()
		case hbKeyStartedAt:
			h.StartedAt, err = d.dec.DecodeInt64()
		case hbKeyLeaving:
			h.Leaving, err = d.dec.DecodeBool()
		case hbKeyAliases:
			h.Aliases, err = decodeAliases(d, h.Aliases)
		default:
			err = d.skip(0)
		}
		if err != nil {
			return malformed(fmt.Sprintf("heartbeat key %q", key), err)
		}
	}
	return nil
}
