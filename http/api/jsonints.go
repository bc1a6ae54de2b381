package api

import "math"

// Fast readers for the flat integer arrays that make up almost all of a hot request body:
// token_ids and mm_routing_info.routing_token_ids ([]uint32), block_hashes and
// sequence_hashes ([]int64). A 512-token prompt is ~2.5 KB of digits and commas, and these
// loops are where a /select spends most of its decoding time.
//
// Each loop has two paths per element:
//   - fast: a plain decimal immediately followed by ',' or ']' (how every client writes
//     them), converted inline with a digit-count bound that makes overflow impossible, so no
//     check is needed per digit;
//   - slow: anything else (whitespace, null, a sign on a u32, too many digits, a fraction, a
//     wrong type, a syntax error) goes through the generic scalar reader, which produces the
//     exact value or the exact error.
// Both paths leave d.pos at the next element, so they can alternate freely within one array.
//
// The result is allocated once, sized by countHint (exact for such arrays), and never aliases
// the body.

// u32s decodes a []uint32 (token ids), with a fast path for a plain decimal directly followed
// by ',' or ']' and one allocation sized from countHint.
func (d *decoder) u32s(dst *[]uint32) error {
	if done, err := beginArray(d, dst); done {
		return err
	}
	b := d.buf
	out := make([]uint32, 0, d.countHint())
	// Invariant at the top of each iteration: d.pos is at the start of element i (possibly at
	// whitespace before it), just after '[' or ','.
	for i := 0; ; i++ {
		p := d.pos
		if p < len(b) && b[p] >= '0' && b[p] <= '9' {
			v := uint64(b[p] - '0')
			q := p + 1
			if v != 0 {
				// At most 10 digits here (< 2^34); longer literals take the slow path, which
				// reports the overflow.
				for q < len(b) && q-p < 10 && b[q] >= '0' && b[q] <= '9' {
					v = v*10 + uint64(b[q]-'0')
					q++
				}
			}
			if q < len(b) && v <= math.MaxUint32 && (b[q] == ',' || b[q] == ']') {
				out = append(out, uint32(v))
				d.pos = q + 1
				if b[q] == ']' {
					d.depth--
					*dst = out
					return nil
				}
				continue
			}
		}
		// Slow path for this element; null is 0, as encoding/json leaves a null element zero.
		var v uint32
		if err := scalar(d, &v, (*decoder).u32); err != nil {
			return elemPath(err, i)
		}
		out = append(out, v)
		if done, err := d.afterElem(); done || err != nil {
			if err == nil {
				*dst = out
			}
			return err
		}
	}
}

// i64s decodes a []int64 (block and sequence hashes), with the same fast path as u32s.
func (d *decoder) i64s(dst *[]int64) error {
	if done, err := beginArray(d, dst); done {
		return err
	}
	b := d.buf
	out := make([]int64, 0, d.countHint())
	for i := 0; ; i++ {
		p := d.pos
		neg := p < len(b) && b[p] == '-'
		if neg {
			p++
		}
		if p < len(b) && b[p] >= '0' && b[p] <= '9' {
			v := uint64(b[p] - '0')
			q := p + 1
			if v != 0 {
				// At most 18 digits here (< 2^63); longer literals take the slow path.
				for q < len(b) && q-p < 18 && b[q] >= '0' && b[q] <= '9' {
					v = v*10 + uint64(b[q]-'0')
					q++
				}
			}
			if q < len(b) && (b[q] == ',' || b[q] == ']') {
				x := int64(v)
				if neg {
					x = -x
				}
				out = append(out, x)
				d.pos = q + 1
				if b[q] == ']' {
					d.depth--
					*dst = out
					return nil
				}
				continue
			}
		}
		// Slow path: exact range checks for 19-digit magnitudes, errors, whitespace, null.
		var v int64
		if err := scalar(d, &v, (*decoder).i64); err != nil {
			return elemPath(err, i)
		}
		out = append(out, v)
		if done, err := d.afterElem(); done || err != nil {
			if err == nil {
				*dst = out
			}
			return err
		}
	}
}

// afterElem consumes the delimiter after an array element: ',' (done=false, d.pos at the next
// element) or ']' (done=true).
func (d *decoder) afterElem() (done bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return false, nil
	case ']':
		d.pos++
		d.depth--
		return true, nil
	}
	return true, d.unexpected("expected `,` or `]`")
}
