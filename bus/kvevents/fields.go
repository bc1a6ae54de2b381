package kvevents

import (
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Field decoders shared by the array and map event forms. Each consumes
// exactly one msgpack value and writes into e. Nesting depth passed to skip
// is 3 for event fields (batch → events → event → field).

// hashList decodes block_hashes: an array of hashes; nil means none.
func (d *Decoder) hashList(e *Event) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("block_hashes: %w", err)
	}
	e.BlockHashes = e.BlockHashes[:0]
	if n <= 0 {
		return nil
	}
	if cap(e.BlockHashes) < n {
		e.BlockHashes = make([]uint64, 0, n)
	}
	if e.BlockHashes, err = d.r.appendHashes(e.BlockHashes, n); err != nil {
		return fmt.Errorf("block_hashes[%d]: %w", len(e.BlockHashes), err)
	}
	return nil
}

// parent decodes parent_block_hash: a hash or nil (chain starts at root).
func (d *Decoder) parent(e *Event) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	if c == msgpcode.Nil {
		e.Parent, e.HasParent = 0, false
		return eofErr(d.r.dec.DecodeNil())
	}
	h, err := d.r.readHash()
	if err != nil {
		return fmt.Errorf("parent_block_hash: %w", err)
	}
	e.Parent, e.HasParent = h, true
	return nil
}

// tokens decodes token_ids: a flat list of u32, or a list of [u32, u32]
// Eagle bigrams flattened to the first elements plus the last second
// element. nil and [] mean no tokens (offloading-connector events).
func (d *Decoder) tokens(e *Event) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("token_ids: %w", err)
	}
	e.TokenIDs = e.TokenIDs[:0]
	e.Eagle = false
	if n <= 0 {
		return nil
	}
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	if !isArray(c) {
		if cap(e.TokenIDs) < n {
			e.TokenIDs = make([]uint32, 0, n)
		}
		if e.TokenIDs, err = d.r.appendTokens(e.TokenIDs, n); err != nil {
			return fmt.Errorf("token_ids[%d]: %w", len(e.TokenIDs), err)
		}
		return nil
	}
	e.Eagle = true
	if cap(e.TokenIDs) < n+1 {
		e.TokenIDs = make([]uint32, 0, n+1)
	}
	for i := 0; i < n; i++ {
		k, err := d.r.arrayLen()
		if err != nil {
			return fmt.Errorf("token_ids[%d]: %w", i, err)
		}
		if k != 2 {
			return fmt.Errorf("token_ids[%d]: bigram has %d elements", i, k)
		}
		first, err := d.r.readToken()
		if err != nil {
			return fmt.Errorf("token_ids[%d][0]: %w", i, err)
		}
		second, err := d.r.readToken()
		if err != nil {
			return fmt.Errorf("token_ids[%d][1]: %w", i, err)
		}
		e.TokenIDs = append(e.TokenIDs, first)
		if i == n-1 {
			e.TokenIDs = append(e.TokenIDs, second)
		}
	}
	return nil
}

// blockSize decodes block_size: a non-negative int (nil means 0).
func (d *Decoder) blockSize(e *Event) error {
	v, _, err := d.r.readOptInt()
	if err != nil {
		return fmt.Errorf("block_size: %w", err)
	}
	if v < 0 || v > math.MaxInt32 {
		return fmt.Errorf("block_size %d out of range", v)
	}
	e.BlockSize = int(v)
	return nil
}

// medium decodes medium (string or nil → device).
func (d *Decoder) medium(e *Event) error {
	s, _, err := d.r.readString()
	if err != nil {
		return fmt.Errorf("medium: %w", err)
	}
	e.Medium = parseMediumBytes(s)
	return nil
}

// loraName decodes lora_name (string or nil; empty counts as absent).
func (d *Decoder) loraName(e *Event) error {
	s, _, err := d.r.readString()
	if err != nil {
		return fmt.Errorf("lora_name: %w", err)
	}
	e.LoraName = intern(s, &d.lastLora)
	return nil
}

// cacheSalt decodes cache_salt (string or nil).
func (d *Decoder) cacheSalt(e *Event) error {
	s, _, err := d.r.readString()
	if err != nil {
		return fmt.Errorf("cache_salt: %w", err)
	}
	e.CacheSalt = intern(s, &d.lastSalt)
	return nil
}

// locality decodes locality ("LOCAL"/"REMOTE"/nil).
func (d *Decoder) locality(e *Event) error {
	s, _, err := d.r.readString()
	if err != nil {
		return fmt.Errorf("locality: %w", err)
	}
	e.Locality = parseLocality(s)
	return nil
}

// specKind decodes kv_cache_spec_kind (string or nil).
func (d *Decoder) specKind(e *Event) error {
	s, _, err := d.r.readString()
	if err != nil {
		return fmt.Errorf("kv_cache_spec_kind: %w", err)
	}
	e.SpecKind = internKind(s)
	return nil
}

// groupIdx decodes group_idx (int or nil).
func (d *Decoder) groupIdx(e *Event) error {
	v, ok, err := d.r.readOptInt()
	if err != nil {
		return fmt.Errorf("group_idx: %w", err)
	}
	e.GroupIdx, e.HasGroupIdx = v, ok
	return nil
}

// slidingWindow decodes kv_cache_spec_sliding_window (int or nil).
func (d *Decoder) slidingWindow(e *Event) error {
	v, ok, err := d.r.readOptInt()
	if err != nil {
		return fmt.Errorf("kv_cache_spec_sliding_window: %w", err)
	}
	e.SlidingWindow, e.HasSlidingWindow = v, ok
	return nil
}

// intern returns b as a string, reusing *last when equal so a stream that
// repeats one value allocates once. Empty input yields "".
func intern(b []byte, last *string) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == *last {
		return *last
	}
	*last = string(b)
	return *last
}

// knownKinds are the kv_cache_spec_kind values seen upstream; decoding one
// of them does not allocate.
var knownKinds = [...]string{
	"full_attention", "mla_attention", "sink_full_attention", "sliding_window",
	"sliding_window_mla", "mamba", "chunked_local_attention",
	"encoder_only_attention", "cross_attention",
}

// internKind returns the constant for a known kind, else a fresh string.
func internKind(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	for _, k := range knownKinds {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

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
	tailGroup tailState = iota
	tailKind
	tailWindow
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

// extraKeys decodes vLLM's extra_keys: one entry per block, each nil or a
// tuple of keys. A key that is a 64-hex string, or a tuple whose first
// element is one (identifier, offset), is a multimodal hash (first 16 hex
// digits); everything else (LoRA names, salts, numbers, bytes) is ignored.
func (d *Decoder) extraKeys(e *Event) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("extra_keys: %w", err)
	}
	for blk := 0; blk < n; blk++ {
		c, err := d.r.peek()
		if err != nil {
			return err
		}
		if !isArray(c) {
			if err := d.r.skip(4); err != nil {
				return err
			}
			continue
		}
		m, err := d.r.arrayLen()
		if err != nil {
			return err
		}
		for j := 0; j < m; j++ {
			if err := d.extraKey(e, blk); err != nil {
				return fmt.Errorf("extra_keys[%d][%d]: %w", blk, j, err)
			}
		}
	}
	padMM(e, n)
	return nil
}

// extraKey decodes one element of a block's extra-key tuple.
func (d *Decoder) extraKey(e *Event, blk int) error {
	c, err := d.r.peek()
	if err != nil {
		return err
	}
	switch {
	case isStr(c):
		s, _, err := d.r.readBytes()
		if err != nil {
			return err
		}
		if v, ok := parseHexDigest(s); ok {
			addMM(e, blk, v)
		}
		return nil
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
			s, _, err := d.r.readBytes()
			if err != nil {
				return err
			}
			if v, ok := parseHexDigest(s); ok {
				addMM(e, blk, v)
			}
		} else if err := d.r.skip(6); err != nil {
			return err
		}
		return d.r.skipN(k-1, 6)
	}
	return d.r.skip(5)
}

// blockMMInfos decodes Dynamo's block_mm_infos: per block nil or
// {"mm_objects": [{"mm_hash": u64, "offsets": ...}, ...]}.
func (d *Decoder) blockMMInfos(e *Event) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("block_mm_infos: %w", err)
	}
	for blk := 0; blk < n; blk++ {
		c, err := d.r.peek()
		if err != nil {
			return err
		}
		if !isMap(c) {
			if err := d.r.skip(4); err != nil {
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
	}
	padMM(e, n)
	return nil
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
