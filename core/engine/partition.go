package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// PartitionKey names a scheduling partition: selection, indexing and load accounting are scoped
// to one (model_name, routing_group) pair.
type PartitionKey struct {
	Model string
	Group string
}

// Compare orders partition keys by model name, then routing group (the order of every listing).
func (k PartitionKey) Compare(o PartitionKey) int {
	if c := cmp.Compare(k.Model, o.Model); c != 0 {
		return c
	}
	return cmp.Compare(k.Group, o.Group)
}

// String is the partition's form in error messages.
func (k PartitionKey) String() string {
	return fmt.Sprintf("model=%s routing_group=%s", k.Model, k.Group)
}

// DumpKey is the partition's key in the /dump recovery format: "<model>:<routing_group>".
func (k PartitionKey) DumpKey() string { return k.Model + ":" + k.Group }

// candidate is one schedulable (worker, rank) of a partition.
type candidate struct {
	w    *worker
	rank uint32
	// kvBlocks is the worker's registered total_kv_blocks (per rank), 0 when it registered
	// none, and invCap its inverse (0 then): the kvselect policy's pressure term
	// (kvselect_pressure.go) and the partition's capacity (partition_capacity.go); cached here
	// because every selection reads it.
	kvBlocks uint64
	invCap   float64
	// invBudget is 1/max_num_batched_tokens of the worker, 0 when it registered none (the
	// kvselect policy's decode term, kvselect_decode.go); cached for the same reason.
	invBudget float64
	// fillScale converts the rank's indexed blocks into blocks of the partition's smallest
	// registered cache (fillScales; the eviction term's occupancy, kvselect_eviction.go).
	fillScale float64
}

func (c candidate) owner() kvwire.Owner { return kvwire.Owner{Worker: c.w.id, Rank: c.rank} }

// candidate is w's rank r as a candidate, its registered limits cached.
func (w *worker) candidate(r uint32) candidate {
	return candidate{w: w, rank: r, kvBlocks: deref(w.spec.TotalKVBlocks, 0), invCap: w.invKVCapacity(), invBudget: w.invBatchBudget()}
}

// partition holds everything scoped to one PartitionKey.
//
// Invariants: every worker in members has key == p.key and passed the metadata checks; the
// tracker has exactly the ranks of the schedulable members; cands is sorted by (worker, rank)
// and lists exactly the ranks of schedulable members.
type partition struct {
	key       PartitionKey
	blockSize uint32
	isEagle   bool
	members   map[uint64]*worker
	cands     []candidate
	index     *radix.Index
	tracker   *load.Tracker
	approx    *approxTTL // non-nil when the index is fed by bookings (use_kv_events=false)
	sessions  map[string]*binding
	seeds     map[keyedSeedKey][2]uint64 // keyed tracking-hash seeds by scope (keyed mode only)

	// owners[i] == cands[i].owner(): a compact copy for the selection fast path's merges.
	owners []kvwire.Owner
	// ordVersion is the tracker's Version at the last rebuild that found cands[i] to be the
	// tracker's owner at ordinal i for every i (ordinalsOK); the fast path reads loads and
	// booked prefixes by ordinal only while the tracker still has that version.
	ordVersion uint64
	ordOK      bool
	// slots maps index owner ranks to candidates for radix.MatchSlots (slotCache).
	slots slotCache
	// predicted is router_predicted_ttl_secs' side index of bookings; nil when not configured.
	predicted *predictedIndex
	// rankNames[r-rankBase] is strconv of global rank r for the candidates' ranks (rebuilt with
	// cands; empty when their span is too sparse to tabulate): response keys without allocating.
	rankNames []string
	rankBase  uint32
	// quality accumulates the routing quality of bookings (quality.go).
	quality RoutingQuality
	// rankSparse: the candidates' ranks were found too sparse to tabulate (partition_cands.go).
	rankSparse bool
	// order is each rank's store order for the KV-index budget (indexbudget.go).
	order map[kvwire.Owner]*storeOrder
	// capacity tallies the candidates' registered KV capacity (partition_capacity.go), and
	// smallestKV is its smallest registered total_kv_blocks as the candidates' fillScale last
	// saw it (syncFillScales).
	capacity   capTally
	smallestKV uint64
}

// newPartition creates an empty partition. approximate: bookings feed the index (events off);
// predicted: bookings also feed a side index for predictedTTL (events on).
func newPartition(key PartitionKey, blockSize uint32, eagle bool, approximate bool, predicted bool) *partition {
	p := &partition{
		key:       key,
		blockSize: blockSize,
		isEagle:   eagle,
		members:   make(map[uint64]*worker),
		index:     radix.New(),
		tracker:   load.NewTracker(),
		sessions:  make(map[string]*binding),
	}
	if approximate {
		p.approx = newApproxTTL()
	}
	if predicted {
		p.predicted = newPredictedIndex()
	}
	return p
}

// rebuild recomputes the candidate list after a membership or lifecycle change.
func (p *partition) rebuild() {
	p.cands = p.cands[:0]
	for _, w := range p.members {
		if !w.schedulable() {
			continue
		}
		for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
			p.cands = append(p.cands, w.candidate(r))
		}
	}
	slices.SortFunc(p.cands, func(a, b candidate) int {
		if c := cmp.Compare(a.w.id, b.w.id); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	p.owners = p.owners[:0]
	for _, c := range p.cands {
		p.owners = append(p.owners, c.owner())
	}
	p.capacity = capTally{}
	p.capacity.tally(p.cands, true)
	p.smallestKV = p.capacity.smallest()
	fillScales(p.cands, p.smallestKV)
	p.syncHeatWindow()
	p.ordOK, p.ordVersion = p.checkOrdinals(), p.tracker.Version()
	p.slots.reset()
	if p.predicted != nil {
		p.predicted.slots.reset()
	}
	p.rankNames, p.rankBase = p.rankNames[:0], 0
	if n := len(p.cands); n > 0 {
		lo, hi := p.cands[0].rank, p.cands[0].rank
		for _, c := range p.cands {
			lo, hi = min(lo, c.rank), max(hi, c.rank)
		}
		if span := uint64(hi) - uint64(lo) + 1; span <= 4*uint64(n)+64 {
			p.rankBase = lo
			for r := uint64(lo); r <= uint64(hi); r++ {
				p.rankNames = append(p.rankNames, strconv.FormatUint(r, 10))
			}
		}
	}
}

// rankName is the decimal form of global rank r.
func (p *partition) rankName(r uint32) string {
	if i := uint64(r) - uint64(p.rankBase); r >= p.rankBase && i < uint64(len(p.rankNames)) {
		return p.rankNames[i]
	}
	return strconv.FormatUint(uint64(r), 10)
}

// slotTable returns the index's slot table (slotCache.table).
func (p *partition) slotTable() []int32 { return p.slots.table(p.index, p.owners) }

// slotCache holds slot[r], the candidate index of index owner rank r or -1 (radix.MatchSlots).
// It is valid while the index is ix at version ver and the candidates are unchanged; rebuild
// and resetIndex drop it (reset), and an index replaced elsewhere (recovery) fails the pointer
// check. The pointer only ever retains an index the partition just dropped until the next
// selection, and those are empty (recovery installs only into empty indexes).
type slotCache struct {
	slot []int32
	ix   *radix.Index
	ver  uint64
}

func (c *slotCache) reset() { c.ix = nil }

// table returns the slot table of ix for owners (sorted), rebuilt first when the index or its
// owner set changed. Cost O(index owners · log candidates) when rebuilt, O(1) otherwise.
func (c *slotCache) table(ix *radix.Index, owners []kvwire.Owner) []int32 {
	if c.ix == ix && c.ver == ix.Version() {
		return c.slot
	}
	slot := c.slot[:0]
	for r := range ix.Owners() {
		o, _ := ix.OwnerAt(r)
		i, ok := slices.BinarySearchFunc(owners, o, kvwire.Owner.Compare)
		if !ok {
			i = -1
		}
		slot = append(slot, int32(i))
	}
	c.slot, c.ix, c.ver = slot, ix, ix.Version()
	return slot
}

// checkOrdinals reports whether the tracker's owners are exactly cands, in the same order (the
// partition invariant; checked once per rebuild so that selections can trust ordinals).
func (p *partition) checkOrdinals() bool {
	if p.tracker.Owners() != len(p.owners) {
		return false
	}
	for i, o := range p.owners {
		if lo, ok := p.tracker.OwnerAt(i); !ok || lo != o {
			return false
		}
	}
	return true
}

// ordinalsValid reports whether candidate i is still the tracker's owner at ordinal i for all i.
func (p *partition) ordinalsValid() bool {
	return p.ordOK && p.ordVersion == p.tracker.Version() && p.tracker.Owners() == len(p.cands)
}

// ready reports whether at least one member is schedulable.
func (p *partition) ready() bool { return len(p.cands) > 0 }

// schedulableRank reports whether (worker, rank) is a schedulable candidate.
func (p *partition) schedulableRank(o kvwire.Owner) (*worker, bool) {
	w, ok := p.members[o.Worker]
	if !ok || !w.schedulable() || !w.hasRank(o.Rank) {
		return nil, false
	}
	return w, true
}

// resetIndex replaces the prefix index (and the predicted side index) with empty ones (the
// partition's shape changed).
func (p *partition) resetIndex(approximate, predicted bool) {
	p.index = radix.New()
	p.order = nil
	p.slots.reset()
	p.approx, p.predicted = nil, nil
	if approximate {
		p.approx = newApproxTTL()
	}
	if predicted {
		p.predicted = newPredictedIndex()
	}
}
