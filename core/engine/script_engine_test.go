package engine

// The single-engine commands of the script language (testdata/README.md lists them).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptState is the engine under test and its virtual clock.
type scriptState struct {
	t   testing.TB
	e   *Engine
	now time.Time
}

func newScriptState(t testing.TB) *scriptState {
	s := &scriptState{t: t}
	s.e, s.now = newEngine(t, nil), t0
	return s
}

// config builds a Config from `new`'s arguments.
func configOf(c scriptCmd) Config {
	cfg := DefaultConfig()
	if c.str("kv_events", "") == "false" {
		cfg.UseKVEvents = false
	}
	durs := map[string]*time.Duration{"ttl": &cfg.TTL, "expiry": &cfg.ActiveRequestExpiry,
		"cache_ttl": &cfg.SelectionCacheTTL, "session_ttl": &cfg.SessionAffinityTTL}
	for k, p := range durs {
		if c.has(k) {
			*p = c.dur(k)
		}
	}
	ints := map[string]*int{"cache_entries": &cfg.SelectionCacheMaxEntries, "max_bookings": &cfg.Limits.MaxBookings,
		"max_bookings_per_worker": &cfg.Limits.MaxBookingsPerWorker, "max_workers": &cfg.Limits.MaxWorkers,
		"max_partitions": &cfg.Limits.MaxPartitions}
	for k, p := range ints {
		if c.has(k) {
			*p = int(c.num(k, 0))
		}
	}
	if c.has("max_booked_blocks") {
		cfg.Limits.MaxBookedBlocks = int64(c.num("max_booked_blocks", 0))
	}
	cfg.SessionAffinityMode = c.str("session_mode", cfg.SessionAffinityMode)
	return cfg
}

// workerSpec builds a spec from `register`'s arguments.
func workerSpec(c scriptCmd) WorkerSpec {
	ws := spec(c.num("id", 0), func(w *WorkerSpec) { w.BlockSize = ptr(uint32(c.num("bs", 4))) })
	if v := c.str("dp", ""); v != "" {
		a, b, _ := strings.Cut(v, ":")
		start, _ := strconv.Atoi(a)
		size, _ := strconv.Atoi(b)
		dp(uint32(start), uint32(size))(&ws)
	}
	if c.has("model") {
		ws.ModelName = ptr(c.str("model", ""))
	}
	if c.has("group") {
		ws.RoutingGroup = ptr(c.str("group", ""))
	}
	if c.str("endpoint", "") == "-" {
		ws.Endpoint = nil
	}
	ws.Taints = c.list("taints")
	for _, kv := range c.list("kv") { // kv=RANK:URL re-points one rank's KV-event endpoint
		r, url, _ := strings.Cut(kv, ":")
		ws.KVEventsEndpoints[r] = url
	}
	if c.has("replay") {
		ws.ReplayEndpoint = ptr(c.str("replay", ""))
	}
	if c.has("total_kv_blocks") {
		ws.TotalKVBlocks = ptr(c.num("total_kv_blocks", 0))
	}
	if c.flag("incomplete") { // only an id and a model: never schedulable
		ws = WorkerSpec{WorkerID: ws.WorkerID, ModelName: ws.ModelName}
	}
	return ws
}

func recordLine(rec WorkerRecord) string {
	out := fmt.Sprintf("worker %d %s", rec.WorkerID, rec.Lifecycle)
	if len(rec.NotSchedulableReasons) > 0 {
		out += ": " + strings.Join(rec.NotSchedulableReasons, "; ")
	}
	return out
}

// selectRequest builds a SelectRequest from select's arguments.
func selectRequest(c scriptCmd) *SelectRequest {
	req := &SelectRequest{Prompt: tokenPrompt(c.tokens("tokens")), Advisory: c.flag("advisory"), AllowedWorkerIDs: c.nums("allowed")}
	if c.has("model") {
		req.ModelName = ptr(c.str("model", ""))
	}
	if c.has("id") {
		req.SelectionID = ptr(c.str("id", ""))
	}
	if c.has("session") {
		req.SessionID = ptr(c.str("session", ""))
	}
	if c.has("affinity") {
		req.AffinityTarget = &AffinityTarget{WorkerID: ptr(c.num("affinity", 0))}
	}
	if c.has("track") {
		req.RouterConfigOverride = &ConfigOverride{TrackPrefillTokens: c.boolp("track")}
	}
	if v := c.str("pin", ""); v != "" {
		w, r, _ := strings.Cut(v, "/")
		wi, _ := strconv.ParseUint(w, 10, 64)
		ri, _ := strconv.ParseUint(r, 10, 32)
		req.PinnedWorker = &PinnedWorker{WorkerID: ptr(wi), DPRank: ptr(uint32(ri))}
	}
	if prefs := c.list("prefer"); len(prefs) > 0 {
		pref := map[string]float32{}
		for _, kv := range prefs {
			k, w, _ := strings.Cut(kv, ":")
			f, err := strconv.ParseFloat(w, 32)
			if err != nil {
				c.fatalf("bad preference %q", kv)
			}
			pref[k] = float32(f)
		}
		req.RoutingConstraints = &RoutingConstraints{PreferredTaints: pref}
	}
	return req
}

func selectLine(resp *SelectResponse) string {
	out := fmt.Sprintf("worker=%d dp_rank=%d effective_prefill=%d potential_decode=%d gpu=%d",
		resp.WorkerID, resp.DPRank, resp.EffectivePrefillTokens, resp.PotentialDecodeBlocks, resp.Overlap.GPU)
	if resp.Booked != nil {
		out += fmt.Sprintf("\nbooked id=%s hashes=%d isl=%d track_prefill=%t", *resp.SelectionID, len(resp.SequenceHashes), resp.ISLTokens, resp.TrackPrefillTokens)
	}
	if wl := resp.WorkerLoad; wl != nil {
		out += fmt.Sprintf("\nworker_load active_prefill=%d capacity=%d", wl.ActivePrefillTokens, wl.PrefillTokenCapacity)
	}
	return out
}

// reserveRequest builds a ReservationRequest: the replay form, or the explicit one with worker=.
func reserveRequest(c scriptCmd) *ReservationRequest {
	req := &ReservationRequest{TrackPrefillTokens: c.boolp("track")}
	if c.has("id") {
		req.SelectionID = ptr(c.str("id", ""))
	}
	if c.has("model") {
		req.ModelName = ptr(c.str("model", ""))
	}
	if c.has("tokens") {
		req.Prompt = tokenPrompt(c.tokens("tokens"))
	}
	if c.has("worker") {
		req.WorkerID = ptr(c.num("worker", 0))
	}
	if c.has("rank") {
		req.DPRank = ptr(uint32(c.num("rank", 0)))
	}
	if c.has("prefill") {
		req.EffectivePrefillTokens = ptr(c.num("prefill", 0))
	}
	if c.has("prefill_load_scale") {
		req.RouterConfigOverride = &ConfigOverride{PrefillLoadScale: c.float("prefill_load_scale")}
	}
	return req
}

// kvEvent builds a stored/removed/cleared KV event for `store`, `remove` and `clear`.
func kvEvent(c scriptCmd) KVEvent {
	o := c.owner()
	switch c.name {
	case "store":
		return storedEvent(o, TierOf(c.str("tier", "device")), c.tokens("parent"), c.tokens("tokens"), 4)
	case "remove":
		st := storedEvent(o, TierOf(c.str("tier", "device")), c.tokens("parent"), c.tokens("tokens"), 4)
		return KVEvent{Kind: KVRemoved, Tier: st.Tier, BlockHashes: st.BlockHashes}
	}
	return KVEvent{Kind: KVCleared}
}

// run executes one command and returns its output.
func (s *scriptState) run(c scriptCmd) string {
	e := s.e
	switch c.name {
	case "new":
		e, err := New(configOf(c), Options{Rand: rand.New(rand.NewPCG(7, 11))})
		if err != nil {
			return errLine(err)
		}
		s.e, s.now = e, t0
		return "ok"
	case "register":
		rec, err := e.UpsertWorker(workerSpec(c))
		if err != nil {
			return errLine(err)
		}
		return recordLine(rec)
	case "delete":
		rec, err := e.DeleteWorker(c.num("id", 0))
		if err != nil {
			return errLine(err)
		}
		return recordLine(rec)
	case "workers":
		var out []string
		for _, rec := range e.Workers(c.str("model", ""), c.str("group", "")) {
			out = append(out, fmt.Sprintf("%s/%s %s", rec.ModelName, rec.RoutingGroup, recordLine(rec)))
		}
		return orNone(out)
	case "store", "remove", "clear":
		st := e.ApplyKVEvents(c.owner(), []KVEvent{kvEvent(c)})
		switch c.name {
		case "store":
			return fmt.Sprintf("stored %d dropped %d", st.StoredBlocks, st.Dropped)
		case "remove":
			return fmt.Sprintf("removed %d unknown %d dropped %d", st.RemovedBlocks, st.UnknownRemoved, st.Dropped)
		}
		return fmt.Sprintf("cleared %d dropped %d", st.Cleared, st.Dropped)
	case "clear_owner":
		return fmt.Sprintf("known %t", e.ClearOwnerBlocks(c.owner()))
	case "overlap":
		q := &PromptQuery{Prompt: tokenPrompt(c.tokens("tokens"))}
		if c.has("model") {
			q.ModelName = ptr(c.str("model", ""))
		}
		sc, err := e.OverlapScores(q)
		if err != nil {
			return errLine(err)
		}
		var out []string
		for _, r := range sc.Workers {
			out = append(out, fmt.Sprintf("%d/%d device=%d host=%d disk=%d", r.WorkerID, r.DPRank, r.DeviceBlocks, r.HostPinnedBlocks, r.DiskBlocks))
		}
		return orNone(out)
	case "select", "select_and_reserve":
		var resp *SelectResponse
		var err error
		if c.name == "select" {
			resp, err = e.Select(selectRequest(c), s.now)
		} else {
			resp, err = e.SelectAndReserve(selectRequest(c), s.now)
		}
		if err != nil {
			return errLine(err)
		}
		return selectLine(resp)
	case "reserve":
		resp, err := e.Reserve(reserveRequest(c), s.now)
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("reserved %s on %s/%s %d/%d endpoint=%s", resp.SelectionID, resp.ModelName, resp.RoutingGroup, resp.WorkerID, resp.DPRank, resp.Endpoint)
	case "prefill_complete", "output_block", "free":
		id := c.str("id", "")
		var err error
		switch c.name {
		case "prefill_complete":
			err = e.PrefillComplete(id)
		case "free":
			err = e.Free(id)
		default:
			err = e.OutputBlock(id, c.float("decay"))
		}
		if err != nil {
			return errLine(err)
		}
		return "ok"
	case "tick":
		if len(c.flags) != 1 {
			c.fatalf("tick takes one duration")
		}
		d, err := time.ParseDuration(c.flags[0])
		if err != nil {
			c.fatalf("bad duration %q", c.flags[0])
		}
		s.now = s.now.Add(d)
		return fmt.Sprintf("now t0+%s", s.now.Sub(t0))
	case "sweep":
		return fmt.Sprintf("freed %d", e.Sweep(s.now))
	case "loads":
		return loadsLines(e)
	case "effects":
		return effectsLines(e, c.flag("verbose"))
	case "pending":
		return fmt.Sprintf("pending %d", e.PendingSelections())
	case "bookings":
		return bookingLines(e)
	case "sessions":
		return sessionLines(e)
	case "dump":
		return dumpLines(e)
	case "recovered":
		p := e.RecoveredPending()
		return fmt.Sprintf("pending partitions=%d entries=%d", p.Partitions, p.Entries)
	case "partitions":
		var out []string
		for _, st := range e.PartitionStats() {
			out = append(out, fmt.Sprintf("%s/%s block_size=%d workers=%d ranks=%d index_entries=%d bookings=%d sessions=%d",
				st.Key.Model, st.Key.Group, st.BlockSize, st.Workers, st.Ranks, st.IndexEntries, st.Bookings, st.Sessions))
		}
		return orNone(out)
	case "limits":
		st := e.LimitStats()
		n := st.Counters
		return fmt.Sprintf("bookings=%d booked_blocks=%d per_worker_entries=%d workers=%d partitions=%d\nrejected: bookings=%d per_worker=%d workers=%d partitions=%d\ndropped_peer_bookings=%d reclaimed_partitions=%d",
			st.Bookings, st.BookedBlocks, len(e.bounds.perWorker), st.Workers, st.Partitions, n.RejectedBookings, n.RejectedWorkerBooking,
			n.RejectedWorkers, n.RejectedPartitions, n.DroppedPeerBookings, n.ReclaimedPartitions)
	case "peer_add", "peer_prefill_complete", "peer_free":
		return fmt.Sprintf("applied %t", e.ApplyReplica(peerEvent(c), s.now))
	case "peer_bind":
		ev := &AffinityEvent{Partition: c.key(), SessionID: c.str("session", ""), Owner: c.owner(),
			Sequence: c.num("seq", 1), Writer: c.num("writer", 99), Sender: c.str("sender", "peer")}
		return fmt.Sprintf("applied %t", e.ApplyAffinity(ev, s.now))
	case "drop_peer_except":
		keep := map[string]struct{}{}
		for _, id := range c.list("keep") {
			keep[id] = struct{}{}
		}
		return fmt.Sprintf("dropped %v", e.DropPeerExcept(c.str("sender", ""), c.key(), keep, nil))
	case "drop_peer":
		return fmt.Sprintf("dropped %d", e.DropPeer(c.str("sender", "")))
	}
	c.fatalf("unknown command")
	return ""
}

// peerEvent builds a peer's lifecycle event: peer_add carries one public sequence hash per
// complete block of tokens (the token id of the block's last token stands for its hash).
func peerEvent(c scriptCmd) *ReplicaEvent {
	ev := &ReplicaEvent{Partition: c.key(), BlockSize: uint32(c.num("bs", 4)), RequestID: c.str("id", ""),
		Sender: c.str("sender", "peer"), Owner: c.owner()}
	switch c.name {
	case "peer_add":
		var seq []uint64
		for i, tok := range c.tokens("tokens") {
			if i%4 == 3 {
				seq = append(seq, uint64(tok))
			}
		}
		track := c.boolp("track")
		ev.Kind = LifecycleAdd
		ev.Add = &ReplicaAdd{TokenSequence: seq, TrackPrefill: track == nil || *track, ISL: c.num("isl", uint64(4*len(seq))),
			PrefillTokens: c.num("prefill", uint64(4*len(seq)))}
	case "peer_prefill_complete":
		ev.Kind = LifecyclePrefillComplete
	default:
		ev.Kind = LifecycleFree
	}
	if c.flag("nobody") {
		ev.Add = nil
	}
	if c.has("kind") {
		ev.Kind = LifecycleKind(c.num("kind", 0))
	}
	return ev
}

// loadsLines prints every rank's (requests, decode blocks, prefill tokens).
func loadsLines(e *Engine) string {
	var out []string
	for _, pl := range e.Loads("", "") {
		if len(pl.Loads) == 0 {
			out = append(out, fmt.Sprintf("%s/%s (no ranks)", pl.ModelName, pl.RoutingGroup))
		}
		for _, l := range pl.Loads {
			out = append(out, fmt.Sprintf("%s/%s %d/%d %s", pl.ModelName, pl.RoutingGroup, l.WorkerID, l.DPRank, triple(l)))
		}
	}
	if len(out) == 0 {
		return "(no partitions)"
	}
	return strings.Join(out, "\n")
}

// bookingLines prints every reservation row, sorted by id.
func bookingLines(e *Engine) string {
	var out []string
	for id, r := range e.resv {
		line := fmt.Sprintf("%s %s/%s %d/%d", id, r.key.Model, r.key.Group, r.owner.Worker, r.owner.Rank)
		if r.fromPeer {
			line += " peer=" + r.peer
		}
		if r.session != "" {
			line += " session=" + r.session
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return orNone(out)
}

// sessionLines prints every session binding, by partition then session id.
func sessionLines(e *Engine) string {
	var out []string
	for key, p := range e.parts {
		for id, b := range p.sessions {
			line := fmt.Sprintf("%s/%s %s -> %d/%d leases=%d seq=%d", key.Model, key.Group, id, b.owner.Worker, b.owner.Rank, b.leases, b.seq)
			if b.idleAt != 0 {
				line += fmt.Sprintf(" idle_until=t0+%s", time.Unix(0, b.idleAt).Sub(t0))
			}
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return orNone(out)
}

// takeOutbox drains the engine's one outbox (TakeReady) and returns the replica events and the
// session bindings to publish. Every script command drains through it.
func takeOutbox(e *Engine) ([]ReplicaEvent, []AffinityEvent) {
	var rd Ready
	e.TakeReady(&rd)
	return rd.Replica, rd.Affinity
}

// effectsLines drains and prints the replica events, then the session bindings, in order.
func effectsLines(e *Engine, verbose bool) string {
	var out []string
	fx, aff := takeOutbox(e)
	for _, ev := range fx {
		out = append(out, effectSummary(&ev, verbose))
	}
	for _, ev := range aff {
		out = append(out, affinityLine(&ev))
	}
	return orNone(out)
}

// effectSummary prints one replica event: every field with verbose, else the readable subset
// (the partition only when it is not the default one).
func effectSummary(ev *ReplicaEvent, verbose bool) string {
	if verbose {
		return effectLine(ev)
	}
	line := fmt.Sprintf("%s %s %d/%d", kindName(ev.Kind), ev.RequestID, ev.Owner.Worker, ev.Owner.Rank)
	if ev.Partition != defKey {
		line = ev.Partition.Model + "/" + ev.Partition.Group + " " + line
	}
	if a := ev.Add; a != nil {
		line += fmt.Sprintf(" hashes=%d isl=%d prefill=%d track=%t", len(a.TokenSequence), a.ISL, a.PrefillTokens, a.TrackPrefill)
	}
	return line
}

// effectLine prints every field of a replica event.
func effectLine(ev *ReplicaEvent) string {
	s := fmt.Sprintf("%s/%s bs=%d %s %s %d/%d sender=%q", ev.Partition.Model, ev.Partition.Group, ev.BlockSize,
		kindName(ev.Kind), ev.RequestID, ev.Owner.Worker, ev.Owner.Rank, ev.Sender)
	if a := ev.Add; a != nil {
		s += fmt.Sprintf(" seq=%v track=%t prefill=%d isl=%d lora=%q republish=%t", a.TokenSequence, a.TrackPrefill,
			a.PrefillTokens, a.ISL, a.LoraName, a.Republish)
		if a.ExpectedOutputTokens != nil {
			s += fmt.Sprintf(" out=%d", *a.ExpectedOutputTokens)
		}
	}
	return s
}

// affinityLine prints one session binding event.
func affinityLine(ev *AffinityEvent) string {
	line := fmt.Sprintf("bind %s -> %d/%d seq=%d writer=%d", ev.SessionID, ev.Owner.Worker, ev.Owner.Rank, ev.Sequence, ev.Writer)
	if ev.Partition != defKey {
		line = ev.Partition.Model + "/" + ev.Partition.Group + " " + line
	}
	return line
}

func kindName(k LifecycleKind) string {
	switch k {
	case LifecycleAdd:
		return "add"
	case LifecyclePrefillComplete:
		return "prefill_complete"
	case LifecycleFree:
		return "free"
	}
	return fmt.Sprintf("kind(%d)", k)
}
