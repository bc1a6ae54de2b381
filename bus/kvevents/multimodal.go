package kvevents

import "fmt"

// Multimodal content reaches the router in two wire shapes, both folded
// into Event.MMHashes (per block, in wire order):
//
//   - vLLM's extra_keys: one entry per block, each nil or a tuple of extra
//     hash keys. vLLM puts multimodal identifiers there (a 64-hex SHA-256
//     string, alone or as an (identifier, offset) pair) next to other keys
//     it mixes into its own block hash: the LoRA name, the cache salt
//     (first block only), prompt-embedding bytes. Only the 64-hex
//     identifiers matter to the router; the first 16 hex digits are the
//     u64 it mixes into its public block hash (see kvhash.MMHash).
//   - Dynamo's block_mm_infos: one entry per block, nil or
//     {"mm_objects": [{"mm_hash": u64, "offsets": [[start, end], ...]}]}.
//
// Typed extra keys seen in one vLLM revision (tagged sub-structs) are
// skipped as opaque values unless they are plain identifier strings or
// tuples led by one.

// perBlock walks a per-block list: fn runs for each entry whose msgpack code want accepts,
// with the block's index; other entries (nil, or shapes this build ignores) are skipped. The
// event's MMHashes are then padded to the list's length.
func (d *Decoder) perBlock(e *Event, name string, want func(byte) bool, fn func(blk int) error) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for blk := 0; blk < n; blk++ {
		c, err := d.r.peek()
		if err != nil {
			return err
		}
		if !want(c) {
			if err := d.r.skip(4); err != nil {
				return err
			}
			continue
		}
		if err := fn(blk); err != nil {
			return err
		}
	}
	padMM(e, n)
	return nil
}

// extraKeys decodes vLLM's extra_keys: one entry per block, each nil or a
// tuple of keys. A key that is a 64-hex string, or a tuple whose first
// element is one (identifier, offset), is a multimodal hash (first 16 hex
// digits); everything else (LoRA names, salts, numbers, bytes) is ignored.
func (d *Decoder) extraKeys(e *Event) error {
	return d.perBlock(e, "extra_keys", isArray, func(blk int) error {
		m, err := d.r.arrayLen()
		if err != nil {
			return err
		}
		for j := 0; j < m; j++ {
			if err := d.extraKey(e, blk); err != nil {
				return fmt.Errorf("extra_keys[%d][%d]: %w", blk, j, err)
			}
		}
		return nil
	})
}

// extraKey decodes one element of a block's extra-key tuple.
func (d *Decoder) extraKey(e *Event, blk int) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	switch {
	case isStr(c):
		return d.hexKey(e, blk)
	case isArray(c):
		k, err := d.r.arrayLen()
		if err != nil {
			return err
		}
		if k == 0 {
			return nil
		}
		if c2, err := d.r.peek(); err != nil {
			return err
		} else if isStr(c2) {
			if err := d.hexKey(e, blk); err != nil {
				return err
			}
		} else if err := d.r.skip(6); err != nil {
			return err
		}
		return d.r.skipN(k-1, 6)
	}
	return d.r.skip(5)
}

// hexKey reads a string key and records it as block blk's multimodal hash when it is a 64-hex
// identifier.
func (d *Decoder) hexKey(e *Event, blk int) error {
	s, _, err := d.r.readBytes()
	if err != nil {
		return err
	}
	if v, ok := parseHexDigest(s); ok {
		addMM(e, blk, v)
	}
	return nil
}

// blockMMInfos decodes Dynamo's block_mm_infos: per block nil or
// {"mm_objects": [{"mm_hash": u64, "offsets": ...}, ...]}.
func (d *Decoder) blockMMInfos(e *Event) error {
	return d.perBlock(e, "block_mm_infos", isMap, func(blk int) error {
		m, err := d.r.mapLen()
		if err != nil {
			return err
		}
		for j := 0; j < m; j++ {
			key, ok, err := d.r.readString()
			if err != nil || !ok {
				return fmt.Errorf("block_mm_infos[%d] key: %w", blk, orNil(err))
			}
			if string(key) != "mm_objects" {
				if err := d.r.skip(5); err != nil {
					return err
				}
				continue
			}
			if err := d.mmObjects(e, blk); err != nil {
				return fmt.Errorf("block_mm_infos[%d]: %w", blk, err)
			}
		}
		return nil
	})
}

// mmObjects decodes a list of {"mm_hash": h, ...} objects for block blk.
func (d *Decoder) mmObjects(e *Event, blk int) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		c, err := d.r.peek()
		if err != nil {
			return err
		}
		if !isMap(c) {
			if err := d.r.skip(6); err != nil {
				return err
			}
			continue
		}
		m, err := d.r.mapLen()
		if err != nil {
			return err
		}
		for j := 0; j < m; j++ {
			key, ok, err := d.r.readString()
			if err != nil || !ok {
				return fmt.Errorf("mm object key: %w", orNil(err))
			}
			if string(key) != "mm_hash" {
				if err := d.r.skip(7); err != nil {
					return err
				}
				continue
			}
			h, err := d.r.readHash()
			if err != nil {
				return fmt.Errorf("mm_hash: %w", err)
			}
			addMM(e, blk, h)
		}
	}
	return nil
}

// addMM records multimodal hash v for block blk.
func addMM(e *Event, blk int, v uint64) {
	for len(e.MMHashes) <= blk {
		e.MMHashes = append(e.MMHashes, nil)
	}
	e.MMHashes[blk] = append(e.MMHashes[blk], v)
}

// padMM extends MMHashes with nil entries to cover all n blocks of a
// per-block list, but only once some block has a hash (otherwise MMHashes
// stays nil and nothing is allocated).
func padMM(e *Event, n int) {
	if len(e.MMHashes) == 0 {
		return
	}
	for len(e.MMHashes) < n {
		e.MMHashes = append(e.MMHashes, nil)
	}
}

// normalizeMM enforces the MMHashes invariant: nil unless some block has a
// multimodal hash.
func normalizeMM(e *Event) {
	for _, m := range e.MMHashes {
		if len(m) > 0 {
			return
		}
	}
	e.MMHashes = nil
}
