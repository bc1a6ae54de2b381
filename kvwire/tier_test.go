package kvwire

import "testing"

func TestTierNames(t *testing.T) {
	for tier := range NumTiers {
		got, ok := ParseTier(tier.String())
		if !ok || got != tier {
			t.Fatalf("ParseTier(%q)=%v,%v", tier.String(), got, ok)
		}
	}
	if s := Tier(9).String(); s != "tier(9)" {
		t.Fatalf("Tier(9).String()=%q", s)
	}
	if _, ok := ParseTier("gpu"); ok {
		t.Fatal(`ParseTier("gpu") succeeded`)
	}
}

func TestOwnerCompare(t *testing.T) {
	os := []Owner{{1, 0}, {1, 1}, {2, 0}}
	for i := range os {
		for j := range os {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := os[i].Compare(os[j]); got != want {
				t.Fatalf("%v.Compare(%v)=%d, want %d", os[i], os[j], got, want)
			}
		}
	}
}
