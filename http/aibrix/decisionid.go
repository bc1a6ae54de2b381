package aibrix

import (
	"errors"
	"fmt"
	"io"

	"github.com/kvselect/kvselect/internal/jsonw"
)

// ErrDecisionID wraps failures of the decision-id entropy source.
var ErrDecisionID = errors.New("cannot generate decision id")

// NewDecisionID returns a random RFC 9562 version-4 UUID in its canonical
// 36-character form, read from src (crypto/rand.Reader in production).
// With 122 random bits, ids are unique across replicas without any
// coordination: the chance of any collision among 2^40 decisions is below
// 2^-42.
func NewDecisionID(src io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(src, b[:]); err != nil {
		return "", fmt.Errorf("%w: %w", ErrDecisionID, err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	j := 0
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = jsonw.Hex[c>>4], jsonw.Hex[c&0xf]
		j += 2
	}
	return string(out[:]), nil
}
