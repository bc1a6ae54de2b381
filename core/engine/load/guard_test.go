package load

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestCrossAndSquaresNeverWrap: bookings of 2^31 tokens after 2^32 cached ones (a peer's
// PrefillTokens and ISL are not validated on the wire) add 2^62 each to PrefillSquares and
// PrefillCross; the fourth would wrap both to 0, making the rank look idle, so Add refuses it
// and the sums stay what three bookings put there.
func TestCrossAndSquaresNeverWrap(t *testing.T) {
	tr := NewTracker()
	o := kvwire.Owner{Worker: 1}
	tr.AddOwner(o)
	for i := range 4 {
		err := tr.Add(Booking{ID: fmt.Sprint(i), Owner: o, PrefillTokens: 1 << 31, ContextTokens: 1 << 32})
		if want := i == 3; want != errors.Is(err, ErrOverflow) {
			t.Fatalf("booking %d: %v", i, err)
		}
	}
	if l := tr.Load(o); l.PrefillSquares != 3<<62 || l.PrefillCross != 3<<62 || l.PendingPrefills != 3 {
		t.Fatalf("after a refused fourth booking: %+v", l)
	}
}

// TestAbsurdContextSampleIgnored: one completion booked with an absurd context (2^62 tokens) is
// not learned. Learned, it dropped the partition's share from 0.69 to 0 and, with the share
// held (learning off), made the rank's model ~10^11 times too fast for ~7,000 honest samples.
func TestAbsurdContextSampleIgnored(t *testing.T) {
	for _, learn := range []bool{true, false} {
		t.Run(fmt.Sprint("learn=", learn), func(t *testing.T) { absurdContextSample(t, learn) })
	}
}

func absurdContextSample(t *testing.T, learn bool) {
	tr, owners, _ := contextFleet(t, 0.7)
	if !learn {
		tr.SetContextShare(0.7, false)
	}
	o := owners[1]
	k0 := tr.ContextShare()
	m0 := tr.Speed(o).Model
	now := int64(1e15)
	for i, ctx := range []uint64{1 << 62, 0} { // the second completes the first's held sample
		id := fmt.Sprint("x", i)
		at := now + int64(i)*int64(1000e6)
		if err := tr.Add(Booking{ID: id, Owner: o, PrefillTokens: 1000, ContextTokens: ctx, AdmittedAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := tr.PrefillCompleteAt(id, at+int64(100e6)); err != nil {
			t.Fatal(err)
		}
	}
	if k := tr.ContextShare(); k != k0 {
		t.Errorf("share %v → %v after one absurd sample", k0, k)
	}
	if m := tr.Speed(o).Model; m.B < 0.5*m0.B {
		t.Errorf("rank's model %+v → %+v after one absurd sample", m0, m)
	}
}
