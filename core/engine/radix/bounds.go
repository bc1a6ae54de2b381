package radix

import "github.com/kvselect/kvselect/kvwire"

// Entry-level operations the engine's per-rank index budget needs (core/engine/indexbudget.go;
// it also uses Holds, dump.go).

// Evict drops o's block stored under external hash ext, in every tier, and reports whether o
// held it. Nodes left without owners and children are freed, as in Remove.
func (ix *Index) Evict(o kvwire.Owner, ext uint64) bool {
	oi, ok := ix.own.lookup(o)
	if !ok {
		return false
	}
	id := ix.lookup.get(oi, ext)
	if id == 0 {
		return false
	}
	ix.deleteEntry(id, ix.findEntry(&ix.nodes[id], oi))
	return true
}
