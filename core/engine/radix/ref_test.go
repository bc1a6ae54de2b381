package radix

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// refIndex is the naive reference the tests compare Index against: maps keyed by the full path of
// local hashes, no sharing, no cleverness. It implements the documented semantics directly.
type refIndex struct {
	entries map[kvwire.Owner]map[string]*refEntry // owner → path key → entry
	lookup  map[kvwire.Owner]map[uint64]string    // owner → external hash → path key
}

type refEntry struct {
	path  []uint64
	ext   uint64
	tiers uint8
}

func newRef() *refIndex {
	return &refIndex{entries: map[kvwire.Owner]map[string]*refEntry{}, lookup: map[kvwire.Owner]map[uint64]string{}}
}

func pathKey(p []uint64) string {
	b := make([]byte, 8*len(p))
	for i, h := range p {
		binary.LittleEndian.PutUint64(b[8*i:], h)
	}
	return string(b)
}

func (r *refIndex) del(o kvwire.Owner, key string) {
	e := r.entries[o][key]
	delete(r.lookup[o], e.ext)
	delete(r.entries[o], key)
	if len(r.entries[o]) == 0 {
		delete(r.entries, o)
		delete(r.lookup, o)
	}
}

func (r *refIndex) Store(o kvwire.Owner, t kvwire.Tier, parent uint64, hasParent bool, blocks []StoredBlock) error {
	if t >= kvwire.NumTiers {
		return ErrInvalidTier
	}
	seen := map[uint64]bool{}
	if hasParent {
		seen[parent] = true
	}
	for _, b := range blocks {
		if seen[b.External] {
			return ErrDuplicateHash
		}
		seen[b.External] = true
	}
	var path []uint64
	if hasParent {
		k, ok := r.lookup[o][parent]
		if !ok {
			return ErrParentNotFound
		}
		path = slices.Clone(r.entries[o][k].path)
	}
	for _, b := range blocks {
		path = append(path, b.Local)
		key := pathKey(path)
		if old, ok := r.lookup[o][b.External]; ok && old != key {
			r.del(o, old)
		}
		if r.entries[o] == nil {
			r.entries[o] = map[string]*refEntry{}
			r.lookup[o] = map[uint64]string{}
		}
		e := r.entries[o][key]
		if e == nil {
			e = &refEntry{path: slices.Clone(path)}
			r.entries[o][key] = e
		} else if e.ext != b.External {
			delete(r.lookup[o], e.ext)
		}
		e.ext = b.External
		e.tiers |= 1 << t
		r.lookup[o][b.External] = key
	}
	return nil
}

func (r *refIndex) Remove(o kvwire.Owner, t kvwire.Tier, ext []uint64) (removed, unknown int) {
	for _, x := range ext {
		key, ok := r.lookup[o][x]
		if !ok || t >= kvwire.NumTiers || r.entries[o][key].tiers&(1<<t) == 0 {
			unknown++
			continue
		}
		removed++
		e := r.entries[o][key]
		e.tiers &^= 1 << t
		if e.tiers == 0 {
			r.del(o, key)
		}
	}
	return removed, unknown
}

func (r *refIndex) ClearOwner(o kvwire.Owner) int {
	n := len(r.entries[o])
	delete(r.entries, o)
	delete(r.lookup, o)
	return n
}

func (r *refIndex) RemoveWorker(w uint64) int {
	n := 0
	for o := range r.entries {
		if o.Worker == w {
			n += r.ClearOwner(o)
		}
	}
	return n
}

func (r *refIndex) tiersAt(o kvwire.Owner, path []uint64) uint8 {
	if e := r.entries[o][pathKey(path)]; e != nil {
		return e.tiers
	}
	return 0
}

// Match re-derives the cumulative tier walk per owner, one owner at a time.
func (r *refIndex) Match(local []uint64) []OwnerMatch {
	var out []OwnerMatch
	for o := range r.entries {
		var cnt [kvwire.NumTiers]int32
		phase := 0
		for i := range local {
			tiers := r.tiersAt(o, local[:i+1])
			for phase < int(kvwire.NumTiers) && tiers&(1<<phase) == 0 {
				phase++
			}
			if phase == int(kvwire.NumTiers) {
				break
			}
			cnt[phase]++
		}
		if cnt != [kvwire.NumTiers]int32{} {
			out = append(out, ownerMatch(o, cnt))
		}
	}
	slices.SortFunc(out, func(a, b OwnerMatch) int { return a.Owner.Compare(b.Owner) })
	return out
}

func (r *refIndex) ExternalPrefix(o kvwire.Owner, local []uint64, n int) []uint64 {
	var out []uint64
	for i := 0; i < n && i < len(local); i++ {
		e := r.entries[o][pathKey(local[:i+1])]
		if e == nil {
			break
		}
		out = append(out, e.ext)
	}
	return out
}

func (r *refIndex) OwnerEntries(o kvwire.Owner) int { return len(r.entries[o]) }

func (r *refIndex) Stats() Stats {
	nodes := map[string]bool{}
	s := Stats{Owners: len(r.entries)}
	for _, m := range r.entries {
		for _, e := range m {
			s.Entries++
			for i := 1; i <= len(e.path); i++ {
				nodes[pathKey(e.path[:i])] = true
			}
		}
	}
	s.Nodes = len(nodes)
	return s
}

// dumpSet is the multiset of single-block events Dump must produce: entries reachable through
// the owner's own chain, one per tier bit.
func (r *refIndex) dumpSet() map[string]int {
	out := map[string]int{}
	for o, m := range r.entries {
		for _, e := range m {
			// The owner's nearest held ancestor; the nodes passed without an entry are the
			// event's bridge (Dump names them by local hash under placeholder external hashes).
			var parent uint64
			has := false
			gap := e.path[:0:0]
			for i := len(e.path) - 1; i >= 1; i-- {
				if pe := m[pathKey(e.path[:i])]; pe != nil {
					parent, has = pe.ext, true
					gap = e.path[i : len(e.path)-1]
					break
				}
			}
			if !has {
				gap = e.path[:len(e.path)-1]
			}
			for t := kvwire.Tier(0); t < kvwire.NumTiers; t++ {
				if e.tiers&(1<<t) != 0 {
					out[blockKey(o, t, parent, has, gap, StoredBlock{External: e.ext, Local: e.path[len(e.path)-1]})]++
				}
			}
		}
	}
	return out
}

// blockKey renders one dumped block canonically: owner, tier, the owner's parent hash (or root),
// the local hashes of a bridge (placeholder external hashes are arbitrary and left out), block.
func blockKey(o kvwire.Owner, t kvwire.Tier, parent uint64, hasParent bool, gap []uint64, bl StoredBlock) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%s/", o.Worker, o.Rank, t)
	if hasParent {
		fmt.Fprintf(&b, "%x", parent)
	} else {
		b.WriteString("root")
	}
	for _, l := range gap {
		fmt.Fprintf(&b, "~%x", l)
	}
	fmt.Fprintf(&b, "/%x:%x", bl.External, bl.Local)
	return b.String()
}

// eventKey renders a single-block event canonically.
func eventKey(ev DumpEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%s/", ev.Owner.Worker, ev.Owner.Rank, ev.Tier)
	if ev.HasParent {
		fmt.Fprintf(&b, "%x", ev.Parent)
	} else {
		b.WriteString("root")
	}
	for _, bl := range ev.Blocks {
		fmt.Fprintf(&b, "/%x:%x", bl.External, bl.Local)
	}
	return b.String()
}

// dumpMultiset flattens ix.Dump into single-block keys (merged runs are split, so any chain
// merging an implementation does is transparent; a bridge keys the block after it).
func dumpMultiset(ix *Index) map[string]int {
	out := map[string]int{}
	ix.Dump(func(ev DumpEvent) bool {
		parent, has := ev.Parent, ev.HasParent
		gap := make([]uint64, ev.Bridge)
		for i := range gap {
			gap[i] = ev.Blocks[i].Local
		}
		for _, bl := range ev.Blocks[ev.Bridge:] {
			out[blockKey(ev.Owner, ev.Tier, parent, has, gap, bl)]++
			parent, has, gap = bl.External, true, nil
		}
		return true
	})
	return out
}

// replayDump rebuilds ix's entries in dst from its Dump: each event's Store, then the Remove of
// its bridge. It returns the first error.
func replayDump(ix, dst *Index) error {
	var err error
	ix.Dump(func(ev DumpEvent) bool {
		if err = dst.Store(ev.Owner, ev.Tier, ev.Parent, ev.HasParent, slices.Clone(ev.Blocks)); err != nil {
			return false
		}
		if ev.Bridge > 0 {
			ph := make([]uint64, ev.Bridge)
			for i := range ph {
				ph[i] = ev.Blocks[i].External
			}
			if removed, _ := dst.Remove(ev.Owner, ev.Tier, ph); removed != ev.Bridge {
				err = fmt.Errorf("bridge of %+v: removed %d of %d placeholders", ev, removed, ev.Bridge)
				return false
			}
		}
		return true
	})
	return err
}

// checkInvariants verifies the index's internal structure (the invariants documented on Index,
// node, table and slab).
func checkInvariants(t testing.TB, ix *Index) {
	t.Helper()
	free := map[uint32]bool{}
	for id := ix.freeNode; id != 0; id = ix.nodes[id].parent {
		if free[id] {
			t.Fatalf("free node list cycles at %d", id)
		}
		free[id] = true
	}
	if len(free) != ix.nfree {
		t.Fatalf("nfree=%d, list has %d", ix.nfree, len(free))
	}
	nchild := make([]uint32, len(ix.nodes))
	kids := 0
	for _, s := range ix.children.slots {
		if s.val == 0 {
			continue
		}
		kids++
		if free[s.val] || int(s.val) >= len(ix.nodes) {
			t.Fatalf("children table points at free/invalid node %d", s.val)
		}
		n := ix.nodes[s.val]
		if n.parent != s.a || n.local != s.b {
			t.Fatalf("children[(%d,%x)]=%d but node has parent %d local %x", s.a, s.b, s.val, n.parent, n.local)
		}
		nchild[s.a]++
	}
	if kids != ix.children.used || kids != len(ix.nodes)-1-ix.nfree {
		t.Fatalf("children entries %d, used %d, live nodes %d", kids, ix.children.used, len(ix.nodes)-1-ix.nfree)
	}
	entries := 0
	perOwner := map[uint32]int{}
	for id := 1; id < len(ix.nodes); id++ {
		if free[uint32(id)] {
			continue
		}
		n := &ix.nodes[id]
		if n.nchild != nchild[id] {
			t.Fatalf("node %d nchild %d, actual %d", id, n.nchild, nchild[id])
		}
		keys := ix.keysOf(n)
		if len(keys) == 0 && n.nchild == 0 {
			t.Fatalf("node %d is an empty leaf", id)
		}
		if len(keys) > 1<<n.class() {
			t.Fatalf("node %d: %d entries in class %d", id, len(keys), n.class())
		}
		for j, k := range keys {
			if k&tierMask == 0 || k&markBit != 0 {
				t.Fatalf("node %d entry %d has key %#x", id, j, k)
			}
			if j > 0 && ownerOf(keys[j-1]) >= ownerOf(k) {
				t.Fatalf("node %d entries not strictly sorted", id)
			}
			ext := ix.ents.ext[n.off+uint32(j)]
			if got := ix.lookup.get(ownerOf(k), ext); got != uint32(id) {
				t.Fatalf("lookup(%d,%x)=%d, want %d", ownerOf(k), ext, got, id)
			}
			perOwner[ownerOf(k)]++
		}
		entries += len(keys)
	}
	if entries != ix.entries || entries != ix.lookup.used {
		t.Fatalf("entries: counted %d, field %d, lookups %d", entries, ix.entries, ix.lookup.used)
	}
	if len(perOwner) != ix.own.live() {
		t.Fatalf("owners holding entries %d, live owners %d", len(perOwner), ix.own.live())
	}
	for i, c := range perOwner {
		if ix.own.list[i].entries != c {
			t.Fatalf("owner %d: entries field %d, counted %d", i, ix.own.list[i].entries, c)
		}
	}
	for r, i := range ix.own.sorted {
		if ix.own.rankOf[i] != uint32(r) {
			t.Fatalf("owner %d rank %d at position %d", i, ix.own.rankOf[i], r)
		}
		if r > 0 && ix.own.list[ix.own.sorted[r-1]].o.Compare(ix.own.list[i].o) >= 0 {
			t.Fatalf("owners not sorted at %d", r)
		}
	}
}

// compareWithRef checks every observable of ix against ref for the given probe paths.
func compareWithRef(t testing.TB, ix *Index, ref *refIndex, probes [][]uint64, owners []kvwire.Owner) {
	t.Helper()
	checkInvariants(t, ix)
	var m Match
	for _, p := range probes {
		ix.Match(p, &m)
		want := ref.Match(p)
		if !slices.Equal(m.Owners, want) {
			t.Fatalf("Match(%x):\n got %+v\nwant %+v", p, m.Owners, want)
		}
		for _, o := range owners {
			for _, n := range []int{0, 1, len(p) / 2, len(p) + 1} {
				got := ix.ExternalPrefix(o, p, n, nil)
				if w := ref.ExternalPrefix(o, p, n); !slices.Equal(got, w) {
					t.Fatalf("ExternalPrefix(%v,%x,%d)=%x want %x", o, p, n, got, w)
				}
			}
		}
	}
	for _, o := range owners {
		if g, w := ix.OwnerEntries(o), ref.OwnerEntries(o); g != w {
			t.Fatalf("OwnerEntries(%v)=%d want %d", o, g, w)
		}
	}
	st, ws := ix.Stats(), ref.Stats()
	if st.Nodes != ws.Nodes || st.Entries != ws.Entries || st.Owners != ws.Owners {
		t.Fatalf("Stats=%+v want %+v", st, ws)
	}
	if got, want := dumpMultiset(ix), ref.dumpSet(); !mapsEqual(got, want) {
		t.Fatalf("Dump multiset differs:\n got %v\nwant %v", got, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ownerMatch builds the OwnerMatch the reference model expects from per-tier counts.
func ownerMatch(o kvwire.Owner, c [kvwire.NumTiers]int32) OwnerMatch {
	return OwnerMatch{Owner: o, Device: c[0], HostExt: c[1], DiskExt: c[2], ExternalExt: c[3]}
}
