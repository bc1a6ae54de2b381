package kvwire

import "strconv"

// Tier is a storage tier a block can be held in. Tiers form the match order device → host_pinned →
// disk → external.
type Tier uint8

// The storage tiers, in match order.
const (
	TierDevice Tier = iota
	TierHostPinned
	TierDisk
	TierExternal
	// NumTiers is the number of valid tiers; any Tier ≥ NumTiers is invalid.
	NumTiers
)

var tierNames = [NumTiers]string{"device", "host_pinned", "disk", "external"}

// String returns the tier's canonical name ("device", "host_pinned", "disk", "external"), or
// "tier(N)" for an invalid tier.
func (t Tier) String() string {
	if t < NumTiers {
		return tierNames[t]
	}
	return "tier(" + strconv.Itoa(int(t)) + ")"
}

// ParseTier maps a canonical name back to its Tier; ok is false for an unknown name.
func ParseTier(s string) (t Tier, ok bool) {
	for i, n := range tierNames {
		if n == s {
			return Tier(i), true
		}
	}
	return 0, false
}
