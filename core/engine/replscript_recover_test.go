package engine

// Dump and recovery commands of the scripts: `dump` prints an engine's /dump records, and the
// multi-replica `recover from=A into=B` rebuilds B's index from A's dump the way a recovering
// replica does (each record replayed as its RouterEvent into a staging RecoveredIndex, then
// InstallRecovered), without the JSON in between (package recovery's decoder has its own tests).

import (
	"fmt"
	"strings"
)

// dumpLines prints every partition's dump records: owner, tier, parent, blocks, bridge.
func dumpLines(e *Engine) string {
	var out []string
	for _, key := range e.DumpKeys() {
		recs, blocks, bs, ok := e.DumpPartitionRecords(key, nil, nil)
		if !ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s block_size=%d", key.Model, key.Group, bs))
		for _, r := range recs {
			line := fmt.Sprintf("  %d/%d %s blocks=%d", r.Owner.Worker, r.Owner.Rank, r.Tier, r.N)
			if r.HasParent {
				line += " under-parent"
			}
			if r.Bridge > 0 {
				line += fmt.Sprintf(" bridge=%d", r.Bridge)
			}
			out = append(out, line)
		}
		_ = blocks
	}
	return orNone(out)
}

// recoverInto replays from's dump into to's engine, partition by partition.
func recoverInto(from, to *Engine) string {
	var out []string
	for _, key := range from.DumpKeys() {
		recs, blocks, bs, ok := from.DumpPartitionRecords(key, nil, nil)
		if !ok {
			continue
		}
		r := NewRecoveredIndex(bs)
		for _, rec := range recs {
			run := blocks[rec.Start : rec.Start+rec.N]
			ev := RouterEvent{Owner: rec.Owner, Tier: rec.Tier, Kind: RouterStored, Parent: rec.Parent, HasParent: rec.HasParent, Blocks: run}
			if err := r.Apply(&ev); err != nil {
				return errLine(err)
			}
			if rec.Bridge > 0 {
				rm := RouterEvent{Owner: rec.Owner, Tier: rec.Tier, Kind: RouterRemoved}
				for _, b := range run[:min(rec.Bridge, rec.N)] {
					rm.Removed = append(rm.Removed, b.External)
				}
				if err := r.Apply(&rm); err != nil {
					return errLine(err)
				}
			}
		}
		st := r.Stats()
		outcome, err := to.InstallRecovered(key, r)
		if err != nil {
			return errLine(err)
		}
		out = append(out, fmt.Sprintf("%s/%s %s: events=%d stored=%d removed=%d skipped=%d staging_entries_after=%d",
			key.Model, key.Group, outcome, st.Events, st.StoredBlocks, st.RemovedBlocks, st.Skipped, r.Entries()))
	}
	return orNone(out)
}

// recoverCmd runs `recover from=A into=B` on the cluster.
func (c *cluster) recoverCmd(cmd scriptCmd) string {
	from, to := c.rep(cmd.str("from", "")), c.rep(cmd.str("into", ""))
	return strings.TrimSpace(recoverInto(from.s.e, to.s.e))
}
