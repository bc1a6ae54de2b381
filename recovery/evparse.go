package recovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Decoding of one RouterEvent. json.Decoder has already checked that the bytes are one
// syntactically valid JSON value (it scanned them to find the value's end), so this reader only
// checks shapes and types, in one pass, without reflection and without allocating: strings are
// compared in place, integers parsed in place, unknown members skipped by depth counting.
//
// Errors here wrap errBadValue: the value is complete, so the stream stays in sync and only the
// partition is rejected.

// errBadValue marks a well-formed JSON value of the wrong shape.
var errBadValue = errors.New("bad value")

func badValue(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadValue, fmt.Sprintf(format, args...))
}

// wireEvent decodes a RouterEvent into ev (reusing its slices) under a blocks limit.
type wireEvent struct {
	ev        *RouterEvent
	maxBlocks int
}

// UnmarshalJSON implements json.Unmarshaler for the parser's Decode call.
func (w *wireEvent) UnmarshalJSON(b []byte) error {
	s := scan{b: b}
	ev := w.ev
	ev.WorkerID, ev.DPRank, ev.Tier, ev.EventID, ev.Kind = 0, 0, TierDevice, 0, 0
	ev.Parent, ev.HasParent = 0, false
	ev.Blocks, ev.Removed = ev.Blocks[:0], ev.Removed[:0]
	var haveWorker, haveEvent bool
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "worker_id":
			haveWorker = true
			v, err := s.uint(64)
			ev.WorkerID = v
			return err
		case "storage_tier":
			if s.null() {
				return nil
			}
			name, err := s.str()
			if err != nil {
				return err
			}
			t, ok := parseTier(name)
			if !ok {
				return badValue("unknown storage_tier %q", name)
			}
			ev.Tier = t
			return nil
		case "event":
			haveEvent = true
			return w.event(&s)
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	if !haveWorker || !haveEvent {
		return badValue("RouterEvent needs worker_id and event")
	}
	return nil
}

// event decodes {"event_id", "data", "dp_rank"}.
func (w *wireEvent) event(s *scan) error {
	ev := w.ev
	haveData := false
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "event_id":
			v, err := s.uint(64)
			ev.EventID = v
			return err
		case "dp_rank":
			if s.null() {
				return nil
			}
			v, err := s.uint(32)
			ev.DPRank = uint32(v)
			return err
		case "data":
			haveData = true
			return w.data(s)
		}
		return s.skip()
	})
	if err == nil && !haveData {
		err = badValue("event needs data")
	}
	return err
}

// data decodes the externally tagged variant: "cleared" | {"cleared": null} | {"stored": {...}}
// | {"removed": {...}}. Exactly one variant must be present.
func (w *wireEvent) data(s *scan) error {
	ev := w.ev
	if s.peek() == '"' {
		name, err := s.str()
		if err != nil {
			return err
		}
		if string(name) != "cleared" {
			return badValue("unknown event data %q", name)
		}
		ev.Kind = EventCleared
		return nil
	}
	return s.object(func(key []byte) error {
		if ev.Kind != 0 {
			return badValue("event data has more than one variant")
		}
		switch string(key) {
		case "cleared":
			ev.Kind = EventCleared
			return s.skip()
		case "stored":
			ev.Kind = EventStored
			return w.stored(s)
		case "removed":
			ev.Kind = EventRemoved
			return w.removed(s)
		}
		return badValue("unknown event data variant %q", key)
	})
}

func (w *wireEvent) stored(s *scan) error {
	ev := w.ev
	haveBlocks := false
	return s.object(func(key []byte) error {
		switch string(key) {
		case "parent_hash":
			if s.null() {
				ev.HasParent = false
				return nil
			}
			v, err := s.uint(64)
			ev.Parent, ev.HasParent = v, true
			return err
		case "blocks":
			if haveBlocks {
				return badValue("duplicate blocks")
			}
			haveBlocks = true
			return s.array(func() error {
				if len(ev.Blocks) >= w.maxBlocks {
					return badValue("more than %d blocks in one event", w.maxBlocks)
				}
				var blk Block
				var haveB, haveT bool
				err := s.object(func(key []byte) error {
					switch string(key) {
					case "block_hash":
						haveB = true
						v, err := s.uint(64)
						blk.BlockHash = v
						return err
					case "tokens_hash":
						haveT = true
						v, err := s.uint(64)
						blk.TokensHash = v
						return err
					}
					return s.skip() // mm_extra_info and future members
				})
				if err == nil && (!haveB || !haveT) {
					err = badValue("block needs block_hash and tokens_hash")
				}
				ev.Blocks = append(ev.Blocks, blk)
				return err
			})
		}
		return s.skip() // start_position and future members
	})
}

func (w *wireEvent) removed(s *scan) error {
	ev := w.ev
	return s.object(func(key []byte) error {
		if string(key) != "block_hashes" {
			return s.skip()
		}
		return s.array(func() error {
			if len(ev.Removed) >= w.maxBlocks {
				return badValue("more than %d removed hashes in one event", w.maxBlocks)
			}
			v, err := s.uint(64)
			ev.Removed = append(ev.Removed, v)
			return err
		})
	})
}

// scan reads one syntactically valid JSON value. Its methods assume validity for structure
// (json.Decoder checked it) but still never index out of range on any input.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scan) null() bool {
	if s.peek() == 'n' && s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object iterates the members of an object, calling member with each key positioned before
// its value. member must consume the value.
func (s *scan) object(member func(key []byte) error) error {
	if s.peek() != '{' {
		return badValue("expected an object")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return badValue("expected ':'")
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return badValue("expected ',' or '}'")
		}
	}
}

// array iterates an array's elements; elem must consume one element.
func (s *scan) array(elem func() error) error {
	if s.peek() != '[' {
		return badValue("expected an array")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return badValue("expected ',' or ']'")
		}
	}
}

// str reads a string. Without escapes it returns the bytes in place; with escapes it decodes
// them (rare: keys and tier names are plain ASCII).
func (s *scan) str() ([]byte, error) {
	if s.peek() != '"' {
		return nil, badValue("expected a string")
	}
	start, err := s.rawStr()
	if err != nil {
		return nil, err
	}
	if raw := s.b[start+1 : s.i-1]; bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		return nil, badValue("bad string: %v", err)
	}
	return []byte(out), nil
}

// uint reads a non-negative integer that fits in bits bits. Fractions, exponents and signs are
// type errors (serde rejects them for u64/u32 too).
func (s *scan) uint(bits uint) (uint64, error) {
	s.ws()
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (1<<64-1-d)/10 {
			return 0, badValue("integer overflows u%d", bits)
		}
		v = v*10 + d
		s.i++
	}
	if s.i == start {
		return 0, badValue("expected an unsigned integer")
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, badValue("expected an unsigned integer, found a fraction")
		}
	}
	if bits < 64 && v >= 1<<bits {
		return 0, badValue("integer overflows u%d", bits)
	}
	return v, nil
}

// skip consumes one value of any type, iteratively (no recursion, so nesting depth costs no
// stack).
func (s *scan) skip() error {
	depth := 0
	for {
		switch c := s.peek(); c {
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			depth--
			s.i++
		case '"':
			if _, err := s.rawStr(); err != nil {
				return err
			}
		case ',', ':':
			s.i++
		case 0:
			return badValue("truncated value")
		default:
			for s.i < len(s.b) && !isDelim(s.b[s.i]) {
				s.i++
			}
		}
		if depth <= 0 {
			if depth < 0 {
				return badValue("unbalanced value")
			}
			if c := s.peek(); c == ',' || c == '}' || c == ']' || c == 0 {
				return nil
			}
		}
	}
}

// rawStr skips a string without decoding it.
func (s *scan) rawStr() (int, error) {
	start := s.i
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return start, nil
		}
		s.i++
	}
	return start, badValue("unterminated string")
}

func isDelim(c byte) bool {
	switch c {
	case ',', ':', '}', ']', '{', '[', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
