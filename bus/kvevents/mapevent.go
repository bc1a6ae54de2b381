package kvevents

import "fmt"

// Map-form events (vLLM >= PR #42892, e.g. v0.26). msgspec writes the tag
// first as "type", then the required fields in declaration order even when
// nil (block_hashes, parent_block_hash, token_ids, block_size, lora_id,
// medium, lora_name for BlockStored; block_hashes, medium for
// BlockRemoved), then optional fields only when not nil (extra_keys,
// group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window). A map event
// therefore cannot be told apart by length: keys are matched by name, in any
// order, and unknown keys (a future field, or the event_version / locality /
// ownership keys of one vLLM revision) are skipped. Fields a kind does not
// have are decoded and then cleared by finishEvent.

// mapEvent decodes a map-form event {"type": tag, field: value, ...}.
// msgspec always writes "type" first, which is the single-pass fast path;
// otherwise the map is scanned once for the tag and then decoded from its
// start, so key order is free. Unknown keys are skipped.
func (d *Decoder) mapEvent(b *Batch) error {
	start := d.r.pos()
	n, err := d.r.mapLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("event map without type")
	}
	key, ok, err := d.r.readString()
	if err != nil || !ok {
		return fmt.Errorf("event key: %w", orNil(err))
	}
	var kind Kind
	var ignored bool
	first := 0 // index of the first pair still to decode
	if string(key) == "type" {
		tag, ok, err := d.r.readString()
		if err != nil || !ok {
			return fmt.Errorf("event type: %w", orNil(err))
		}
		kind, ignored = kindOf(tag)
		first = 1
	} else {
		if kind, ignored, err = d.findType(start); err != nil {
			return err
		}
		d.r.seek(start)
		if n, err = d.r.mapLen(); err != nil {
			return err
		}
	}
	if kind == KindInvalid || kind == KindAllBlocksCleared {
		if kind == KindInvalid && !ignored {
			b.Unknown++
		}
		// Skip the members not yet consumed: all of them when the slow path rewound (first is
		// 0), the rest after the fast path read "type" first.
		if err := d.r.skipN(2*(n-first), 3); err != nil {
			return err
		}
		if kind == KindAllBlocksCleared {
			b.next().Kind = KindAllBlocksCleared
		}
		return nil
	}
	e := b.next()
	e.Kind = kind
	for i := first; i < n; i++ {
		key, ok, err := d.r.readString()
		if err != nil || !ok {
			return fmt.Errorf("%s key: %w", kind, orNil(err))
		}
		if err := d.mapField(e, key); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	finishEvent(e)
	return nil
}

// findType scans the map starting at offset start for its "type" entry.
func (d *Decoder) findType(start int) (Kind, bool, error) {
	d.r.seek(start)
	n, err := d.r.mapLen()
	if err != nil {
		return KindInvalid, false, err
	}
	for i := 0; i < n; i++ {
		key, ok, err := d.r.readString()
		if err != nil || !ok {
			return KindInvalid, false, fmt.Errorf("event key: %w", orNil(err))
		}
		if string(key) == "type" {
			tag, ok, err := d.r.readString()
			if err != nil || !ok {
				return KindInvalid, false, fmt.Errorf("event type: %w", orNil(err))
			}
			k, ignored := kindOf(tag)
			return k, ignored, nil
		}
		if err := d.r.skip(3); err != nil {
			return KindInvalid, false, err
		}
	}
	return KindInvalid, false, fmt.Errorf("event map without type")
}

// mapField decodes the value of one map-form field into e. The key bytes
// live in the reader's scratch buffer, so the switch runs before any value
// is read.
func (d *Decoder) mapField(e *Event, key []byte) error {
	switch string(key) {
	case "block_hashes":
		return d.hashList(e)
	case "parent_block_hash":
		return d.parent(e)
	case "token_ids":
		return d.tokens(e)
	case "block_size":
		return d.blockSize(e)
	case "medium":
		return d.medium(e)
	case "lora_name":
		return d.loraName(e)
	case "cache_salt":
		return d.cacheSalt(e)
	case "extra_keys":
		return d.extraKeys(e)
	case "block_mm_infos":
		return d.blockMMInfos(e)
	case "group_idx":
		return d.groupIdx(e)
	case "kv_cache_spec_kind":
		return d.specKind(e)
	case "kv_cache_spec_sliding_window":
		return d.slidingWindow(e)
	case "locality":
		return d.locality(e)
	}
	// "type" (second pass), lora_id (legacy) and unknown keys.
	return d.r.skip(3)
}
