package kvevents

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// unhex decodes a hex string that may contain spaces and newlines.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex in test table: %v", err)
	}
	return b
}

// u reinterprets a signed hash (SGLang's wire form) as u64 bits.
func u(i int64) uint64 { return uint64(i) }

// diffBatch describes the first difference between two batches, or returns
// "" when they are equal. TS is compared by bits (NaN-safe); nil and empty
// slices are equal. Unknown is compared only when withUnknown.
func diffBatch(got, want *Batch, withUnknown bool) string {
	if math.Float64bits(got.TS) != math.Float64bits(want.TS) {
		return fmt.Sprintf("TS %v, want %v", got.TS, want.TS)
	}
	if got.HasDPRank != want.HasDPRank || got.DPRank != want.DPRank {
		return fmt.Sprintf("rank (%v,%d), want (%v,%d)", got.HasDPRank, got.DPRank, want.HasDPRank, want.DPRank)
	}
	if withUnknown && got.Unknown != want.Unknown {
		return fmt.Sprintf("Unknown %d, want %d", got.Unknown, want.Unknown)
	}
	if len(got.Events) != len(want.Events) {
		return fmt.Sprintf("%d events, want %d: %+v", len(got.Events), len(want.Events), got.Events)
	}
	for i := range got.Events {
		if d := diffEvent(&got.Events[i], &want.Events[i]); d != "" {
			return fmt.Sprintf("event %d: %s", i, d)
		}
	}
	return ""
}

func diffEvent(g, w *Event) string {
	switch {
	case g.Kind != w.Kind:
		return fmt.Sprintf("Kind %v, want %v", g.Kind, w.Kind)
	case !slices.Equal(g.BlockHashes, w.BlockHashes):
		return fmt.Sprintf("BlockHashes %v, want %v", g.BlockHashes, w.BlockHashes)
	case g.HasParent != w.HasParent || g.Parent != w.Parent:
		return fmt.Sprintf("Parent (%v,%d), want (%v,%d)", g.HasParent, g.Parent, w.HasParent, w.Parent)
	case !slices.Equal(g.TokenIDs, w.TokenIDs):
		return fmt.Sprintf("TokenIDs %v, want %v", g.TokenIDs, w.TokenIDs)
	case g.Eagle != w.Eagle:
		return fmt.Sprintf("Eagle %v, want %v", g.Eagle, w.Eagle)
	case g.BlockSize != w.BlockSize:
		return fmt.Sprintf("BlockSize %d, want %d", g.BlockSize, w.BlockSize)
	case g.Medium != w.Medium:
		return fmt.Sprintf("Medium %v, want %v", g.Medium, w.Medium)
	case g.LoraName != w.LoraName || g.CacheSalt != w.CacheSalt:
		return fmt.Sprintf("lora/salt %q/%q, want %q/%q", g.LoraName, g.CacheSalt, w.LoraName, w.CacheSalt)
	case len(g.MMHashes) != len(w.MMHashes) || (g.MMHashes == nil) != (w.MMHashes == nil):
		return fmt.Sprintf("MMHashes %v, want %v", g.MMHashes, w.MMHashes)
	case g.HasGroupIdx != w.HasGroupIdx || g.GroupIdx != w.GroupIdx:
		return fmt.Sprintf("GroupIdx (%v,%d), want (%v,%d)", g.HasGroupIdx, g.GroupIdx, w.HasGroupIdx, w.GroupIdx)
	case g.SpecKind != w.SpecKind:
		return fmt.Sprintf("SpecKind %q, want %q", g.SpecKind, w.SpecKind)
	case g.HasSlidingWindow != w.HasSlidingWindow || g.SlidingWindow != w.SlidingWindow:
		return fmt.Sprintf("SlidingWindow (%v,%d), want (%v,%d)", g.HasSlidingWindow, g.SlidingWindow, w.HasSlidingWindow, w.SlidingWindow)
	case g.Locality != w.Locality:
		return fmt.Sprintf("Locality %v, want %v", g.Locality, w.Locality)
	}
	for i := range g.MMHashes {
		if !slices.Equal(g.MMHashes[i], w.MMHashes[i]) || (g.MMHashes[i] == nil) != (w.MMHashes[i] == nil) {
			return fmt.Sprintf("MMHashes %v, want %v", g.MMHashes, w.MMHashes)
		}
	}
	return ""
}
