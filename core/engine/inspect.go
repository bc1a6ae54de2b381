package engine

import (
	"cmp"
	"slices"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// PotentialLoad is one rank's load, with or without a prompt's projected contribution.
type PotentialLoad struct {
	WorkerID               uint64 `json:"worker_id"`
	DPRank                 uint32 `json:"dp_rank"`
	PotentialPrefillTokens uint64 `json:"potential_prefill_tokens"`
	PotentialDecodeBlocks  uint64 `json:"potential_decode_blocks"`
	ActiveRequests         uint64 `json:"active_requests"`
}

// PartitionLoads is one element of GET /loads.
type PartitionLoads struct {
	ModelName        string          `json:"model_name"`
	RoutingGroup     string          `json:"routing_group"`
	Loads            []PotentialLoad `json:"loads"`
	PendingCount     uint64          `json:"pending_count"`
	PendingISLTokens uint64          `json:"pending_isl_tokens"`
	// PrefillSpeeds is every rank's learned prefill speed (speed.go), one row per rank in the
	// order of Loads. A kvselect addition: Dynamo's /loads has no such field.
	PrefillSpeeds []RankSpeed `json:"prefill_speeds,omitempty"`
	// QueueOrder is the partition's learned queue discipline (load/order.go), with the speeds.
	// A kvselect addition.
	QueueOrder *QueueOrder `json:"queue_order,omitempty"`
}

// QueueOrder is a partition's learned queue discipline (GET /loads, PartitionStats): the share
// of prefill completions a younger booking of the same rank overtook, its samples, and whether
// the partition counts as reordering.
type QueueOrder struct {
	OvertakenShare float64 `json:"overtaken_share"`
	Samples        uint64  `json:"samples"`
	Reordered      bool    `json:"reordered"`
}

// queueOrderOf is tr's learned queue discipline.
func queueOrderOf(tr *load.Tracker) QueueOrder {
	share, n := tr.ReorderShare()
	return QueueOrder{OvertakenShare: share, Samples: n, Reordered: tr.Reordered()}
}

// RankSpeed is one row of PartitionLoads.PrefillSpeeds.
type RankSpeed struct {
	WorkerID uint64 `json:"worker_id"`
	DPRank   uint32 `json:"dp_rank"`
	PrefillSpeed
}

// PromptQuery is the body of POST /potential_loads and POST /overlap_scores.
type PromptQuery struct {
	ModelName    *string `json:"model_name,omitempty"`
	RoutingGroup *string `json:"routing_group,omitempty"`
	Prompt
	RouterConfigOverride *ConfigOverride `json:"router_config_override,omitempty"`
}

func (q *PromptQuery) key() PartitionKey {
	return PartitionKey{Model: deref(q.ModelName, DefaultName), Group: deref(q.RoutingGroup, DefaultName)}
}

// Loads returns the active load of every rank of every partition (GET /loads), sorted by model
// and routing group; empty filters match everything.
func (e *Engine) Loads(model, group string) []PartitionLoads { return e.loads(model, group, false) }

// LoadsWithSpeeds is Loads with every rank's learned prefill speed (PrefillSpeeds), as GET
// /loads serves it. Speeds are per replica (learned locally), so replicas' answers differ there.
func (e *Engine) LoadsWithSpeeds(model, group string) []PartitionLoads {
	return e.loads(model, group, true)
}

func (e *Engine) loads(model, group string, speeds bool) []PartitionLoads {
	out := []PartitionLoads{}
	var buf []load.RankLoad
	for key, p := range e.parts {
		if (model != "" && key.Model != model) || (group != "" && key.Group != group) {
			continue
		}
		buf = p.tracker.Loads(buf[:0])
		pl := PartitionLoads{ModelName: key.Model, RoutingGroup: key.Group, Loads: make([]PotentialLoad, 0, len(buf))}
		if speeds {
			pl.PrefillSpeeds = make([]RankSpeed, 0, len(buf))
			qo := queueOrderOf(p.tracker)
			pl.QueueOrder = &qo
		}
		for _, l := range buf {
			pl.Loads = append(pl.Loads, PotentialLoad{
				WorkerID: l.Owner.Worker, DPRank: l.Owner.Rank, PotentialPrefillTokens: l.ActivePrefillTokens,
				PotentialDecodeBlocks: l.ActiveBlocks, ActiveRequests: uint64(l.ActiveRequests),
			})
			if !speeds {
				continue
			}
			pl.PrefillSpeeds = append(pl.PrefillSpeeds, RankSpeed{WorkerID: l.Owner.Worker, DPRank: l.Owner.Rank,
				PrefillSpeed: prefillSpeedOf(p.tracker.Speed(l.Owner))})
		}
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b PartitionLoads) int {
		return PartitionKey{a.ModelName, a.RoutingGroup}.Compare(PartitionKey{b.ModelName, b.RoutingGroup})
	})
	return out
}

// prepareQuery validates a prompt query and resolves its partition, weights and hashes.
func (e *Engine) prepareQuery(q *PromptQuery) (*partition, weights, normalized, error) {
	if err := q.RouterConfigOverride.Validate(); err != nil {
		return nil, weights{}, normalized{}, err
	}
	p, err := e.readyPartition(q.key())
	if err != nil {
		return nil, weights{}, normalized{}, err
	}
	w := e.weightsFor(q.RouterConfigOverride)
	n, err := e.normalize(p, &q.Prompt, w.assumeReuse, true)
	return p, w, n, err
}

// PotentialLoads estimates every schedulable rank's load if it received the prompt
// (POST /potential_loads).
func (e *Engine) PotentialLoads(q *PromptQuery) ([]PotentialLoad, error) {
	p, w, n, err := e.prepareQuery(q)
	if err != nil {
		return nil, err
	}
	cs := e.score(p, &n, w)
	out := make([]PotentialLoad, 0, len(cs))
	for i := range cs {
		s := &cs[i]
		pl := PotentialLoad{
			WorkerID: s.Owner.Worker, DPRank: s.Owner.Rank,
			PotentialPrefillTokens: s.Load.ActivePrefillTokens,
			PotentialDecodeBlocks:  s.Load.ActiveBlocks + uint64(len(n.seq)-s.BookedPrefixBlocks),
			ActiveRequests:         uint64(s.Load.ActiveRequests),
		}
		if w.trackPrefill {
			pl.PotentialPrefillTokens += n.isl - min(cachedTokens(s, uint64(p.blockSize), w), n.isl)
		}
		out = append(out, pl)
	}
	return out, nil
}

// OverlapScores is the body of POST /overlap_scores.
type OverlapScores struct {
	BlockSize   uint32       `json:"block_size"`
	NumBlocks   int          `json:"num_blocks"`
	Workers     []OverlapRow `json:"workers"`
	SharedCache SharedCache  `json:"shared_cache"`
}

// OverlapRow is one rank's tiered overlap, in blocks. host_pinned_blocks and disk_blocks are
// cumulative (Mooncake semantics).
type OverlapRow struct {
	WorkerID                  uint64  `json:"worker_id"`
	DPRank                    uint32  `json:"dp_rank"`
	DeviceBlocks              uint64  `json:"device_blocks"`
	HostPinnedBlocks          uint64  `json:"host_pinned_blocks"`
	DiskBlocks                uint64  `json:"disk_blocks"`
	HostPinnedExtensionBlocks uint64  `json:"host_pinned_extension_blocks"`
	DiskExtensionBlocks       uint64  `json:"disk_extension_blocks"`
	SharedBeyondDeviceBlocks  *uint64 `json:"shared_beyond_device_blocks"`
	RouterCreditBlocks        float64 `json:"router_credit_blocks"`
}

// SharedCache describes the (host-injected) shared cache; kvselect has none.
type SharedCache struct {
	Enabled        bool        `json:"enabled"`
	TotalHitBlocks uint64      `json:"total_hit_blocks"`
	Ranges         [][2]uint64 `json:"ranges"`
	Error          *string     `json:"error"`
}

// OverlapScores returns per-rank tiered overlap rows for a prompt: every schedulable rank (even
// with zero overlap) plus any other rank with hits, sorted by (worker, rank).
func (e *Engine) OverlapScores(q *PromptQuery) (*OverlapScores, error) {
	p, w, n, err := e.prepareQuery(q)
	if err != nil {
		return nil, err
	}
	res := &OverlapScores{BlockSize: p.blockSize, NumBlocks: len(n.block), Workers: []OverlapRow{}, SharedCache: SharedCache{Ranges: [][2]uint64{}}}
	row := func(o kvwire.Owner, dev, host, disk int32) OverlapRow {
		return OverlapRow{
			WorkerID: o.Worker, DPRank: o.Rank,
			DeviceBlocks:              uint64(dev),
			HostPinnedBlocks:          uint64(dev + host),
			DiskBlocks:                uint64(dev + host + disk),
			HostPinnedExtensionBlocks: uint64(host),
			DiskExtensionBlocks:       uint64(disk),
			RouterCreditBlocks:        w.credit*float64(dev) + w.host*float64(host) + w.disk*float64(disk),
		}
	}
	seen := make(map[kvwire.Owner]int, len(p.cands))
	for _, c := range p.cands {
		seen[c.owner()] = len(res.Workers)
		res.Workers = append(res.Workers, row(c.owner(), 0, 0, 0))
	}
	if len(n.block) > 0 {
		for _, m := range p.matches(n.block, &e.scratch.match) {
			r := row(m.Owner, m.Device, m.HostExt, m.DiskExt+m.ExternalExt)
			if i, ok := seen[m.Owner]; ok {
				res.Workers[i] = r
			} else {
				res.Workers = append(res.Workers, r)
			}
		}
	}
	slices.SortFunc(res.Workers, func(a, b OverlapRow) int {
		if c := cmp.Compare(a.WorkerID, b.WorkerID); c != 0 {
			return c
		}
		return cmp.Compare(a.DPRank, b.DPRank)
	})
	return res, nil
}
