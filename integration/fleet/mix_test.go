package fleet

import "testing"

// TestMix: a single name is Preset (and "" the default), names joined by MixSeparator are
// resolved in order, and a bad part — unknown, empty, or the legacy model, whose timing is not
// a step model — fails the whole mix.
func TestMix(t *testing.T) {
	one, err := Mix("")
	if err != nil || len(one) != 1 || one[0].Name != DefaultPreset {
		t.Fatalf(`Mix("") = %v, %v; want the default preset`, one, err)
	}
	legacy, err := Mix(PresetLegacy)
	if err != nil || len(legacy) != 1 || !legacy[0].Legacy {
		t.Fatalf("Mix(legacy) = %v, %v; want the legacy preset alone", legacy, err)
	}
	mix, err := Mix(PresetH100_8B + MixSeparator + PresetA100_8B + MixSeparator + PresetH100_8B)
	if err != nil {
		t.Fatal(err)
	}
	if len(mix) != 3 || mix[0].Name != PresetH100_8B || mix[1].Name != PresetA100_8B || mix[2].Name != PresetH100_8B {
		t.Fatalf("mix resolved to %v", mix)
	}
	for _, bad := range []string{"h100-8b+nope", "h100-8b+", "+a100-8b", "h100-8b++a100-8b", "h100-8b+legacy"} {
		if got, err := Mix(bad); err == nil {
			t.Errorf("Mix(%q) = %v, want an error", bad, got)
		}
	}
	h, a := mix[0], mix[1]
	h.KVTokens, a.KVTokens = 100*512, 60*512
	if n := MixNumBlocks([]Spec{h, a}, 512); n != 60 {
		t.Errorf("MixNumBlocks = %d, want the smaller capacity, 60", n)
	}
}
