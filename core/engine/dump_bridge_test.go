package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// orphanIndex: owner o stored chain 1-2-3 (local hashes 11, 12, 13) and removed its middle block.
func orphanIndex(t *testing.T, o kvwire.Owner) *radix.Index {
	t.Helper()
	ix := radix.New()
	if err := ix.Store(o, 0, 0, false, []radix.StoredBlock{{External: 1, Local: 11}, {External: 2, Local: 12}, {External: 3, Local: 13}}); err != nil {
		t.Fatal(err)
	}
	if rm, _ := ix.Remove(o, 0, []uint64{2}); rm != 1 {
		t.Fatal("middle block not removed")
	}
	return ix
}

// TestMergeIndexKeepsBlocksBelowARemovedMiddleBlock: merging a recovered index into a live one
// keeps the owner's block below its removed middle block, so re-storing the middle block
// restores the full match, as in the source.
func TestMergeIndexKeepsBlocksBelowARemovedMiddleBlock(t *testing.T) {
	o := kvwire.Owner{Worker: 1}
	dst := radix.New()
	mergeIndex(dst, orphanIndex(t, o))
	if !dst.Holds(o, 3) || dst.Holds(o, 2) {
		t.Fatalf("merged index: holds 3 %v (want true), holds 2 %v (want false)", dst.Holds(o, 3), dst.Holds(o, 2))
	}
	var m radix.Match
	dst.Match([]uint64{11, 12, 13}, &m)
	if len(m.Owners) != 1 || m.Owners[0].Device != 1 {
		t.Fatalf("before re-storing the middle block: %+v, want 1 device block (the gap is not held)", m.Owners)
	}
	if err := dst.Store(o, 0, 1, true, []radix.StoredBlock{{External: 2, Local: 12}}); err != nil {
		t.Fatal(err)
	}
	dst.Match([]uint64{11, 12, 13}, &m)
	if len(m.Owners) != 1 || m.Owners[0].Device != 3 {
		t.Fatalf("after re-storing the middle block: %+v, want 3 device blocks", m.Owners)
	}
}

// TestDumpJSONBridgesARemovedMiddleBlock pins the wire form: the stored chain bridging the gap
// with a placeholder, then the removed event of the placeholder, same worker, tier and rank.
func TestDumpJSONBridgesARemovedMiddleBlock(t *testing.T) {
	var out []byte
	orphanIndex(t, kvwire.Owner{Worker: 1, Rank: 2}).Dump(func(ev radix.DumpEvent) bool {
		if ev.Bridge > 0 {
			out = AppendStoredEvent(out, 5, ev)
		}
		return true
	})
	s := string(out)
	if !strings.HasPrefix(s, `{"worker_id":1,"storage_tier":"device","event":{"event_id":5,"data":{"stored":{"parent_hash":1,"start_position":null,"blocks":[{"block_hash":`) ||
		!strings.Contains(s, `,"tokens_hash":12,"mm_extra_info":null},{"block_hash":3,"tokens_hash":13,"mm_extra_info":null}]}},"dp_rank":2}},`+
			`{"worker_id":1,"storage_tier":"device","event":{"event_id":5,"data":{"removed":{"block_hashes":[`) ||
		!strings.HasSuffix(s, `]}},"dp_rank":2}}`) || bytes.Count(out, []byte(`"removed"`)) != 1 {
		t.Fatalf("bridged dump events:\n%s", s)
	}
}
