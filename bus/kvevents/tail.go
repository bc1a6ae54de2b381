package kvevents

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Trailing positional fields. vLLM's array-like structs only ever append
// fields, so a decoder keyed on position reads every older layout; but
// SGLang reuses position 7 for a metadata map and Dynamo's own publishers
// emit a shorter, type-directed tail. The tail decoder below therefore
// combines position (the expected next slot) with the value's msgpack type:
//
//	BlockStored  position 9.. : group_idx, kv_cache_spec_kind, sliding window
//	BlockRemoved position 3.. : group_idx, kv_cache_spec_kind, sliding window
//
// plus, anywhere in the tail, an array (block_mm_infos) or a map
// (metadata: cache_salt, locality, lora_name).

// metadata decodes a metadata map: SGLang's {"cache_salt": s} element and
// this package's encoder extension (cache_salt, locality, lora_name).
// Unknown keys are skipped.
func (d *Decoder) metadata(e *Event) error {
	n, err := d.r.mapLen()
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for i := 0; i < n; i++ {
		key, ok, err := d.r.readString()
		if err != nil || !ok {
			return fmt.Errorf("metadata key: %w", orNil(err))
		}
		switch string(key) {
		case "cache_salt":
			err = d.cacheSalt(e)
		case "locality":
			err = d.locality(e)
		case "lora_name":
			err = d.loraName(e)
		default:
			err = d.r.skip(4)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tailState tracks which optional trailing field a positional event expects
// next: vLLM appends group_idx, kv_cache_spec_kind and
// kv_cache_spec_sliding_window in that order, each possibly nil.
type tailState uint8

const (
	// tailGroup: nothing consumed yet; an int is group_idx.
	tailGroup tailState = iota
	// tailKind: group_idx slot filled (or nil); a string is the spec kind,
	// an int can only be the sliding window.
	tailKind
	// tailWindow: spec kind slot filled; an int is the sliding window.
	tailWindow
	// tailDone: all three slots filled; further scalars are skipped.
	tailDone
)

// tail decodes one trailing positional element. nil fills the expected slot
// as absent; an int is group_idx while that slot is expected and the
// sliding window after it; a string is the spec kind; an array is
// block_mm_infos; a map is metadata; anything else is skipped. This reads
// vLLM's positional layout exactly and still accepts producers that omit
// leading slots (type-directed, like Dynamo's decoder).
func (d *Decoder) tail(e *Event, t *tailState) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		if *t < tailDone {
			*t++
		}
		return eofErr(d.r.dec.DecodeNil())
	case isInt(c):
		switch *t {
		case tailGroup:
			*t = tailKind
			return d.groupIdx(e)
		case tailKind, tailWindow:
			*t = tailDone
			return d.slidingWindow(e)
		}
		return d.r.skip(3)
	case isStr(c):
		if *t <= tailKind {
			*t = tailWindow
			return d.specKind(e)
		}
		return d.r.skip(3)
	case isArray(c):
		return d.blockMMInfos(e)
	case isMap(c):
		return d.metadata(e)
	}
	return d.r.skip(3)
}
