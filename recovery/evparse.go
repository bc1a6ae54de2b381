package recovery

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kvselect/kvselect/kvwire"
)

// Decoding of one RouterEvent by a jsontext token walk: shapes and types in one pass, without
// reflection or allocation (names and numbers are read as raw values, valid until the next read).
//
// Errors wrapping errBadValue mean a syntactically valid value of the wrong shape; every helper
// consumes the value it was given before returning one, so the parser can step over the rest of
// the event (see parser.events) and reject only the partition. Any other error is the
// decoder's (syntax, truncation, a reader limit) and breaks the stream.

// errBadValue marks a well-formed JSON value of the wrong shape.
var errBadValue = errors.New("bad value")

func badValue(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadValue, fmt.Sprintf(format, args...))
}

// walk reads values of a /dump document from d.
type walk struct {
	d         *jsontext.Decoder
	maxBlocks int
}

// event decodes one RouterEvent into ev, reusing its slices.
func (w *walk) event(ev *RouterEvent) error {
	ev.WorkerID, ev.DPRank, ev.Tier, ev.EventID, ev.Kind = 0, 0, kvwire.TierDevice, 0, 0
	ev.Parent, ev.HasParent = 0, false
	ev.Blocks, ev.Removed = ev.Blocks[:0], ev.Removed[:0]
	var haveWorker, haveEvent bool
	err := w.object(func(key []byte) (err error) {
		switch string(key) {
		case "worker_id":
			haveWorker = true
			ev.WorkerID, err = w.uint(64)
		case "storage_tier":
			if w.null() {
				return nil
			}
			name, err := w.str()
			if err != nil {
				return err
			}
			t, ok := kvwire.ParseTier(string(name))
			if !ok {
				return badValue("unknown storage_tier %q", name)
			}
			ev.Tier = t
		case "event":
			haveEvent = true
			err = w.inner(ev)
		default:
			err = w.d.SkipValue()
		}
		return err
	})
	if err == nil && (!haveWorker || !haveEvent) {
		err = badValue("RouterEvent needs worker_id and event")
	}
	return err
}

// inner decodes {"event_id", "data", "dp_rank"}.
func (w *walk) inner(ev *RouterEvent) error {
	haveData := false
	err := w.object(func(key []byte) (err error) {
		switch string(key) {
		case "event_id":
			ev.EventID, err = w.uint(64)
		case "dp_rank":
			if !w.null() {
				var v uint64
				v, err = w.uint(32)
				ev.DPRank = uint32(v)
			}
		case "data":
			haveData = true
			err = w.data(ev)
		default:
			err = w.d.SkipValue()
		}
		return err
	})
	if err == nil && !haveData {
		err = badValue("event needs data")
	}
	return err
}

// data decodes the externally tagged variant: "cleared" | {"cleared": null} | {"stored": {...}}
// | {"removed": {...}}. Exactly one variant must be present.
func (w *walk) data(ev *RouterEvent) error {
	if w.d.PeekKind() == '"' {
		name, err := w.str()
		if err == nil && string(name) != "cleared" {
			err = badValue("unknown event data %q", name)
		}
		ev.Kind = EventCleared
		return err
	}
	return w.object(func(key []byte) error {
		if ev.Kind != 0 {
			return badValue("event data has more than one variant")
		}
		switch string(key) {
		case "cleared":
			ev.Kind = EventCleared
			return w.d.SkipValue()
		case "stored":
			ev.Kind = EventStored
			return w.stored(ev)
		case "removed":
			ev.Kind = EventRemoved
			return w.removed(ev)
		}
		return badValue("unknown event data variant %q", key)
	})
}

func (w *walk) stored(ev *RouterEvent) error {
	haveBlocks := false
	return w.object(func(key []byte) (err error) {
		switch string(key) {
		case "parent_hash":
			ev.HasParent = !w.null()
			if ev.HasParent {
				ev.Parent, err = w.uint(64)
			}
			return err
		case "blocks":
			if haveBlocks {
				return badValue("duplicate blocks")
			}
			haveBlocks = true
			return w.array(func() error {
				if len(ev.Blocks) >= w.maxBlocks {
					return badValue("more than %d blocks in one event", w.maxBlocks)
				}
				blk, err := w.block()
				ev.Blocks = append(ev.Blocks, blk)
				return err
			})
		}
		return w.d.SkipValue() // start_position and future members
	})
}

func (w *walk) block() (blk Block, err error) {
	var haveB, haveT bool
	err = w.object(func(key []byte) (err error) {
		switch string(key) {
		case "block_hash":
			haveB = true
			blk.BlockHash, err = w.uint(64)
		case "tokens_hash":
			haveT = true
			blk.TokensHash, err = w.uint(64)
		default:
			err = w.d.SkipValue() // mm_extra_info and future members
		}
		return err
	})
	if err == nil && (!haveB || !haveT) {
		err = badValue("block needs block_hash and tokens_hash")
	}
	return blk, err
}

func (w *walk) removed(ev *RouterEvent) error {
	return w.object(func(key []byte) error {
		if string(key) != "block_hashes" {
			return w.d.SkipValue()
		}
		return w.array(func() error {
			if len(ev.Removed) >= w.maxBlocks {
				return badValue("more than %d removed hashes in one event", w.maxBlocks)
			}
			v, err := w.uint(64)
			ev.Removed = append(ev.Removed, v)
			return err
		})
	})
}

// wrongKind consumes the next value and reports that it is not the expected kind.
func (w *walk) wrongKind(want string) error {
	if err := w.d.SkipValue(); err != nil {
		return err
	}
	return badValue("expected %s", want)
}

// null consumes a null if one comes next.
func (w *walk) null() bool {
	if w.d.PeekKind() != 'n' {
		return false
	}
	_, err := w.d.ReadToken()
	return err == nil
}

// object iterates the members of an object, calling member with each name (valid until its
// value is read) positioned before the value. member must consume the value.
func (w *walk) object(member func(key []byte) error) error {
	if w.d.PeekKind() != '{' {
		return w.wrongKind("an object")
	}
	if _, err := w.d.ReadToken(); err != nil {
		return err
	}
	for w.d.PeekKind() != '}' {
		key, err := w.str()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
	}
	_, err := w.d.ReadToken()
	return err
}

// array iterates an array's elements; elem must consume one element.
func (w *walk) array(elem func() error) error {
	if w.d.PeekKind() != '[' {
		return w.wrongKind("an array")
	}
	if _, err := w.d.ReadToken(); err != nil {
		return err
	}
	for w.d.PeekKind() != ']' {
		if err := elem(); err != nil {
			return err
		}
	}
	_, err := w.d.ReadToken()
	return err
}

// str reads a string (or an object name), unquoted; without escapes, in place.
func (w *walk) str() ([]byte, error) {
	if w.d.PeekKind() != '"' {
		return nil, w.wrongKind("a string")
	}
	v, err := w.d.ReadValue()
	if err != nil {
		return nil, err
	}
	if raw := v[1 : len(v)-1]; bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	return jsontext.AppendUnquote(nil, v)
}

// uint reads a non-negative integer that fits in bits bits. Fractions, exponents and signs are
// type errors (serde rejects them for u64/u32 too).
func (w *walk) uint(bits uint) (uint64, error) {
	if w.d.PeekKind() != '0' {
		return 0, w.wrongKind("an unsigned integer")
	}
	num, err := w.d.ReadValue()
	if err != nil {
		return 0, err
	}
	if bytes.ContainsAny(num, ".eE") {
		return 0, badValue("expected an unsigned integer, found a fraction")
	}
	if num[0] == '-' {
		return 0, badValue("expected an unsigned integer")
	}
	var v uint64
	for _, c := range num {
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, badValue("integer overflows u%d", bits)
		}
		v = v*10 + d
	}
	if bits < 64 && v >= 1<<bits {
		return 0, badValue("integer overflows u%d", bits)
	}
	return v, nil
}
