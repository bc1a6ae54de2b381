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
