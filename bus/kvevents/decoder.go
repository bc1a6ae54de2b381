package kvevents

import (
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoder decodes KVEventBatch payloads into reusable Batches with the
// msgpack low-level API (no reflection).
//
// The zero value is ready to use. A Decoder is not safe for concurrent use
// and must not be copied after first use; it keeps a scratch buffer and
// small string caches that make steady-state decoding allocation-free.
type Decoder struct {
	r reader
	// lastLora / lastSalt cache the most recent adapter name and cache salt
	// so that a stream repeating the same value does not allocate a new
	// string per event. Strings never alias the payload.
	lastLora, lastSalt string
}

// NewDecoder returns a ready Decoder (equivalent to new(Decoder)).
func NewDecoder() *Decoder { return new(Decoder) }

// Decode decodes payload into b, reusing b's storage. On error b holds no
// events (its TS and rank are unspecified) and the error wraps ErrMalformed;
// the caller must not advance its watermark. Unknown event tags are not
// errors: they are skipped and counted in b.Unknown.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	b.reset()
	d.r.reset(payload)
	if err := d.batch(b); err != nil {
		b.reset()
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if d.r.rd.Len() != 0 {
		b.reset()
		return fmt.Errorf("%w: %d trailing bytes after the batch", ErrMalformed, d.r.rd.Len())
	}
	return nil
}

// batch decodes the outer KVEventBatch: a positional array
// [ts, events(, dp_rank, ...)] or a map.
//
// Nesting depths passed to skip count from the batch (0): events list 1,
// event 2, event field 3, and so on; MaxDepth bounds them. Elements past
// the third are skipped so that a future vLLM field appended to the batch
// does not break older selectors.
func (d *Decoder) batch(b *Batch) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c):
		n, err := d.r.arrayLen()
		if err != nil {
			return err
		}
		if n < 2 {
			return fmt.Errorf("batch array has %d elements, want at least 2", n)
		}
		if b.TS, err = d.r.readFloat(); err != nil {
			return fmt.Errorf("ts: %w", err)
		}
		if err := d.events(b); err != nil {
			return err
		}
		if n >= 3 {
			if err := d.rank(b); err != nil {
				return err
			}
		}
		return d.r.skipN(n-3, 1)
	case isMap(c):
		return d.batchMap(b)
	}
	return fmt.Errorf("batch: code %#x is neither array nor map", c)
}

// batchMap decodes the map form {ts, events, data_parallel_rank}.
func (d *Decoder) batchMap(b *Batch) error {
	n, err := d.r.mapLen()
	if err != nil {
		return err
	}
	sawEvents := false
	for i := 0; i < n; i++ {
		key, _, err := d.r.readString()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch string(key) {
		case "ts":
			if b.TS, err = d.r.readFloat(); err != nil {
				return fmt.Errorf("ts: %w", err)
			}
		case "events":
			if sawEvents {
				return fmt.Errorf("duplicate events key")
			}
			sawEvents = true
			if err := d.events(b); err != nil {
				return err
			}
		case "data_parallel_rank", "attn_dp_rank":
			if err := d.rank(b); err != nil {
				return err
			}
		default:
			if err := d.r.skip(1); err != nil {
				return err
			}
		}
	}
	if !sawEvents {
		return fmt.Errorf("batch map without events")
	}
	return nil
}

// rank decodes data_parallel_rank: an int in int32 range (>= 0) or nil.
func (d *Decoder) rank(b *Batch) error {
	v, ok, err := d.r.readOptInt()
	if err != nil {
		return fmt.Errorf("data_parallel_rank: %w", err)
	}
	if !ok {
		b.DPRank, b.HasDPRank = 0, false
		return nil
	}
	if v < 0 || v > math.MaxInt32 {
		return fmt.Errorf("data_parallel_rank %d out of range", v)
	}
	b.DPRank, b.HasDPRank = int32(v), true
	return nil
}

// events decodes the events array (nil is accepted as empty).
func (d *Decoder) events(b *Batch) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := 0; i < n; i++ {
		if err := d.event(b); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// kindOf maps a wire tag to a Kind. ignored is true for the Ignored tag;
// (KindInvalid, false) means unknown.
func kindOf(tag []byte) (k Kind, ignored bool) {
	switch string(tag) {
	case TagBlockStored:
		return KindBlockStored, false
	case TagBlockRemoved:
		return KindBlockRemoved, false
	case TagAllBlocksCleared:
		return KindAllBlocksCleared, false
	case TagIgnored:
		return KindInvalid, true
	}
	return KindInvalid, false
}

// event decodes one event in array or map form and appends it to b (unless
// its tag is unknown or Ignored).
func (d *Decoder) event(b *Batch) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c):
		return d.arrayEvent(b)
	case isMap(c):
		return d.mapEvent(b)
	}
	return fmt.Errorf("code %#x is neither array nor map", c)
}

// arrayEvent decodes a tagged positional event [tag, fields...].
func (d *Decoder) arrayEvent(b *Batch) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("empty event array")
	}
	tag, ok, err := d.r.readString()
	if err != nil || !ok {
		return fmt.Errorf("event tag: %w", orNil(err))
	}
	kind, ignored := kindOf(tag)
	if kind == KindInvalid {
		if !ignored {
			b.Unknown++
		}
		return d.r.skipN(n-1, 3)
	}
	e := b.next()
	e.Kind = kind
	switch kind {
	case KindBlockStored:
		err = d.storedFields(e, n-1)
	case KindBlockRemoved:
		err = d.removedFields(e, n-1)
	default:
		err = d.r.skipN(n-1, 3)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	finishEvent(e)
	return nil
}

// finishEvent enforces per-kind invariants after decoding: MMHashes is nil
// unless some block has multimodal content, and a BlockRemoved carries no
// BlockStored-only fields (a map event may list any keys).
func finishEvent(e *Event) {
	normalizeMM(e)
	if e.Kind == KindBlockRemoved {
		e.Parent, e.HasParent = 0, false
		e.TokenIDs = e.TokenIDs[:0]
		e.Eagle = false
		e.BlockSize = 0
		e.LoraName = ""
		e.MMHashes = nil
	}
}

// orNil substitutes a descriptive error for a nil tag.
func orNil(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("tag is nil")
}

// Positional layouts by producer (element 0 is the tag; every producer
// writes all of its fields, nil included, so the length identifies the
// version):
//
//	pos  BlockStored field          vLLM versions / producers
//	1    block_hashes               all
//	2    parent_block_hash          all
//	3    token_ids                  all (Eagle: list of bigrams)
//	4    block_size                 all
//	5    lora_id (deprecated)       all; read and discarded
//	6    medium                     vLLM >= PR #19737, SGLang with medium
//	7    lora_name | metadata map   vLLM >= #27577 | SGLang salted events
//	8    extra_keys                 vLLM >= #33304
//	9    group_idx                  vLLM >= #37688
//	10   kv_cache_spec_kind         vLLM >= #40984
//	11   sliding_window             vLLM >= #40984
//
// BlockRemoved is [tag, block_hashes, medium, group_idx] at most in vLLM
// (2 elements in the oldest SGLang); AllBlocksCleared is [tag].

// storedFields decodes the n positional BlockStored fields after the tag:
// block_hashes, parent_block_hash, token_ids, block_size, lora_id (ignored),
// medium, then position 7 (lora_name string/nil, or SGLang's metadata map),
// position 8 (extra_keys array/nil; anything else is a tail element), and a
// tail of group_idx / kv_cache_spec_kind / kv_cache_spec_sliding_window /
// block_mm_infos / metadata recognised by type (see tail).
func (d *Decoder) storedFields(e *Event, n int) error {
	var t tailState
	for i := 1; i <= n; i++ {
		var err error
		switch i {
		case 1:
			err = d.hashList(e)
		case 2:
			err = d.parent(e)
		case 3:
			err = d.tokens(e)
		case 4:
			err = d.blockSize(e)
		case 5: // lora_id: legacy, ignored
			err = d.r.skip(3)
		case 6:
			err = d.medium(e)
		case 7:
			err = d.position7(e)
		case 8:
			var c byte
			if c, err = d.r.peek(); err == nil {
				if c == msgpcode.Nil || isArray(c) {
					err = d.extraKeys(e)
				} else {
					err = d.tail(e, &t)
				}
			}
		default:
			err = d.tail(e, &t)
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
	}
	return nil
}

// removedFields decodes BlockRemoved's positional fields: block_hashes,
// medium, then the tail (group_idx, kv_cache_spec_kind, sliding window).
func (d *Decoder) removedFields(e *Event, n int) error {
	var t tailState
	for i := 1; i <= n; i++ {
		var err error
		switch i {
		case 1:
			err = d.hashList(e)
		case 2:
			err = d.medium(e)
		default:
			err = d.tail(e, &t)
		}
		if err != nil {
			return fmt.Errorf("field %d: %w", i, err)
		}
	}
	return nil
}

// position7 decodes BlockStored position 7: vLLM's lora_name (string or
// nil) or SGLang's metadata map ({"cache_salt": ...}).
func (d *Decoder) position7(e *Event) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	if isMap(c) {
		return d.metadata(e)
	}
	return d.loraName(e)
}
