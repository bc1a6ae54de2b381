package load

import "math"

// WeightUnit is the number of fixed-point weight units in one block. All
// block weights are integers in these units (1e-9 block), so the running sums
// never drift: adding and later removing the same blocks restores a counter
// bit for bit. A weight fits in a uint32 (WeightUnit < 2^32); an owner's sum
// fits in a uint64 for up to 1.8e10 blocks.
const WeightUnit = 1_000_000_000

// fractionWeight converts a decay fraction to fixed-point weight units,
// rounding to the nearest unit. ok is false for NaN and values outside
// [0, 1]; the weight is then meaningless.
func fractionWeight(f float64) (w uint32, ok bool) {
	if !(f >= 0 && f <= 1) { // also rejects NaN
		return 0, false
	}
	return uint32(math.Round(f * WeightUnit)), true
}

// roundBlocks rounds a fixed-point weight sum to whole blocks, half away
// from zero (the sum is never negative), without the overflow risk of
// adding half a unit first.
func roundBlocks(w uint64) uint64 {
	q, r := w/WeightUnit, w%WeightUnit
	if r >= WeightUnit/2 {
		q++
	}
	return q
}
