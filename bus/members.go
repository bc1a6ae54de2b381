package bus

import (
	"slices"
	"strings"
	"time"
)

// Members is the membership table of one replica: which replicas are alive
// (from heartbeats), since when, under which boot id, and which boot ids
// are superseded.
//
// It is pure: no goroutines, no clock, no I/O. Time enters as the now
// argument of [Members.Observe] and [Members.Expire], so tests drive it with
// explicit times. It is not safe for concurrent use; the [Replicator]
// guards it with its mutex.
//
// Liveness: a replica is live from its first heartbeat until a leave
// message from the same boot, or until Expire finds it silent for more than
// MissedBeats × Interval.
//
// Boot ids: every replica id has a boot registry entry holding its current
// boot id and up to [retiredBoots] superseded ones. A message carrying a
// new boot id for a known replica id means the replica restarted: the old
// boot id is retired, and from then on messages from a retired boot (late
// or reordered traffic of the dead process, or a second process wrongly
// sharing the id) are rejected ([BootRetired]). A boot id, once superseded,
// is never accepted again for that replica id; that invariant is what lets
// core drop a restarted peer's bookings exactly once.
type Members struct {
	interval time.Duration
	missed   int

	// live holds the live members by id.
	// Invariant: for every live member, boots[id].hasCurrent and
	// boots[id].current == live[id].BootID.
	live map[string]*Member
	// boots is the boot registry; it outlives liveness (expired and departed
	// ids keep their entry so stale traffic is still recognised).
	// Invariant: len(boots) <= maxBootRecords + len(live) between calls.
	boots map[string]*bootRecord
	// aliases holds the aliases each live member announced (aliases.go); an entry exists only
	// for a live id and is read-only once stored.
	aliases map[string][]string
	// expiry overrides missed × interval when positive (SetExpiryAfter).
	expiry time.Duration
	// maxLive bounds live; a heartbeat of a new replica id beyond it is rejected and counted.
	// Invariant: len(live) <= maxLive.
	maxLive  int
	rejected uint64
}

// DefaultMaxMembers bounds the live members of one table (a selector cluster has a handful of
// replicas; the bound only stops a sender inventing ids).
const DefaultMaxMembers = 1024

// SetExpiryAfter sets the silence after which a member expires (and, in core, its mirrored
// bookings are released); d <= 0 restores MissedBeats × Interval.
func (m *Members) SetExpiryAfter(d time.Duration) { m.expiry = d }

// SetMaxLive bounds the live members; n <= 0 restores [DefaultMaxMembers].
func (m *Members) SetMaxLive(n int) {
	m.maxLive = orDefault(n, DefaultMaxMembers)
}

// Rejected counts heartbeats of new replica ids refused because the table was full.
func (m *Members) Rejected() uint64 { return m.rejected }

// Member is one live replica as seen through its heartbeats.
type Member struct {
	ID        string
	BootID    uint64
	HTTPAddr  string
	StartedAt int64     // unix nanoseconds, as announced
	FirstSeen time.Time // first heartbeat of this boot
	LastSeen  time.Time // latest heartbeat of this boot
}

// ChangeKind says how the membership changed.
type ChangeKind uint8

// Membership changes.
const (
	ChangeNone      ChangeKind = iota
	MemberJoined               // first heartbeat of a replica not live before
	MemberRestarted            // live replica announced a new boot id
	MemberLeft                 // graceful leave message
	MemberExpired              // no heartbeat for MissedBeats intervals
)

// String names the change kind.
func (k ChangeKind) String() string {
	switch k {
	case MemberJoined:
		return "joined"
	case MemberRestarted:
		return "restarted"
	case MemberLeft:
		return "left"
	case MemberExpired:
		return "expired"
	}
	return "none"
}

// MemberChange reports one membership transition. Member is the state after
// a join/restart and the last state before a leave/expiry.
type MemberChange struct {
	Kind   ChangeKind
	Member Member
}

// BootVerdict classifies the boot id of an incoming message.
type BootVerdict uint8

// Boot verdicts.
const (
	BootNew       BootVerdict = iota + 1 // first message ever from this replica id
	BootCurrent                          // the replica's current boot id
	BootRestarted                        // a new boot id: the previous boot is now retired
	BootRetired                          // a superseded boot id: drop the message
	// BootUnauthenticated: an unauthenticated (v1 subject) message for a replica id that has
	// been heard on its own v2 subject. Dropped, and it changes nothing: a boot change is
	// believed only from the replica's own subject once it has one.
	BootUnauthenticated
)

// String names the verdict.
func (v BootVerdict) String() string {
	switch v {
	case BootNew:
		return "new"
	case BootCurrent:
		return "current"
	case BootRestarted:
		return "restarted"
	case BootRetired:
		return "retired"
	case BootUnauthenticated:
		return "unauthenticated"
	}
	return "invalid"
}

// Observation is what one heartbeat did to the table.
type Observation struct {
	Verdict    BootVerdict
	PrevBootID uint64       // the superseded boot id when Verdict == BootRestarted
	Change     MemberChange // Change.Kind == ChangeNone when liveness did not change
	// Rejected is true when the heartbeat would have added a member to a full table.
	Rejected bool
}

const (
	// retiredBoots is how many superseded boot ids are remembered per
	// replica id. More than one guards against a crash loop whose old
	// incarnations' traffic is still in flight.
	retiredBoots = 4
	// maxBootRecords bounds the boot registry against senders inventing ids.
	maxBootRecords = 4096
)

type bootRecord struct {
	current    uint64
	hasCurrent bool
	retired    [retiredBoots]uint64
	nRetired   int // number of valid entries in retired
	next       int // ring position of the next retirement
	last       uint64
	// authenticated: this id has been heard on its own (v2) subject; from then on
	// unauthenticated messages for it are refused (BootUnauthenticated).
	authenticated bool
}

// DefaultMissedBeats is the expiry threshold used when NewMembers gets a
// non-positive missedBeats: three silent heartbeat periods declare a replica dead (its
// mirrored bookings are then released; see core/replication.go).
const DefaultMissedBeats = 3

// NewMembers returns an empty table. A replica expires after missedBeats
// heartbeat intervals of silence; non-positive arguments take 1 s and
// [DefaultMissedBeats].
func NewMembers(interval time.Duration, missedBeats int) *Members {
	interval, missedBeats = orDefault(interval, time.Second), orDefault(missedBeats, DefaultMissedBeats)
	return &Members{interval: interval, missed: missedBeats, maxLive: DefaultMaxMembers,
		live: make(map[string]*Member), boots: make(map[string]*bootRecord)}
}

// ExpiryAfter is the silence after which a member expires.
func (m *Members) ExpiryAfter() time.Duration {
	if m.expiry > 0 {
		return m.expiry
	}
	return time.Duration(m.missed) * m.interval
}

// CheckBoot is CheckBootFrom for an authenticated message (one that arrived on its sender's
// own subject).
func (m *Members) CheckBoot(id string, boot uint64) (v BootVerdict, prev uint64) {
	return m.CheckBootFrom(id, boot, true)
}

// CheckBootFrom classifies boot for replica id and updates the boot registry
// (a new boot id retires the previous one). It is idempotent for repeated
// (id, boot) pairs. It does not touch liveness. authenticated says whether the
// message came on id's own v2 subject; an unauthenticated message for an id
// already heard authenticated gets BootUnauthenticated and changes nothing.
func (m *Members) CheckBootFrom(id string, boot uint64, authenticated bool) (v BootVerdict, prev uint64) {
	r := m.boots[id]
	if r == nil {
		m.trimBoots()
		m.boots[id] = &bootRecord{current: boot, hasCurrent: true, last: boot, authenticated: authenticated}
		return BootNew, 0
	}
	if r.authenticated && !authenticated {
		return BootUnauthenticated, 0
	}
	r.authenticated = r.authenticated || authenticated
	if r.hasCurrent && r.current == boot {
		return BootCurrent, 0
	}
	if slices.Contains(r.retired[:r.nRetired], boot) {
		return BootRetired, 0
	}
	prev = r.last
	if r.hasCurrent {
		r.retire(r.current)
	}
	r.current, r.hasCurrent, r.last = boot, true, boot
	return BootRestarted, prev
}

func (r *bootRecord) retire(boot uint64) {
	r.retired[r.next] = boot
	r.next = (r.next + 1) % retiredBoots
	if r.nRetired < retiredBoots {
		r.nRetired++
	}
	r.hasCurrent = false
}

// trimBoots keeps the registry bounded: when full, it forgets ids that are
// not live (their stale traffic is then treated as new; harmless, since
// such ids are not peers' current incarnations).
func (m *Members) trimBoots() {
	if len(m.boots) < maxBootRecords {
		return
	}
	for id := range m.boots {
		if _, ok := m.live[id]; !ok {
			delete(m.boots, id)
		}
	}
}

// Observe is ObserveFrom for an authenticated heartbeat.
func (m *Members) Observe(hb *Heartbeat, now time.Time) Observation {
	return m.ObserveFrom(hb, now, true)
}

// ObserveFrom applies one heartbeat (or leave) received at now; authenticated as for
// CheckBootFrom. A heartbeat that would add a member to a full table is rejected: nothing
// changes but the Rejected counter.
func (m *Members) ObserveFrom(hb *Heartbeat, now time.Time, authenticated bool) Observation {
	cur, isLive := m.live[hb.Sender]
	if !isLive && !hb.Leaving && len(m.live) >= m.maxLive {
		m.rejected++
		return Observation{Rejected: true}
	}
	v, prev := m.CheckBootFrom(hb.Sender, hb.BootID, authenticated)
	obs := Observation{Verdict: v, PrevBootID: prev}
	if v == BootRetired || v == BootUnauthenticated {
		return obs
	}
	if hb.Leaving {
		m.boots[hb.Sender].retire(hb.BootID)
		if isLive {
			delete(m.live, hb.Sender)
			delete(m.aliases, hb.Sender)
			obs.Change = MemberChange{Kind: MemberLeft, Member: *cur}
		}
		return obs
	}
	m.setAliases(hb.Sender, hb.Aliases)
	if isLive && cur.BootID == hb.BootID {
		cur.LastSeen, cur.HTTPAddr, cur.StartedAt = now, hb.HTTPAddr, hb.StartedAt
		return obs
	}
	mem := &Member{ID: hb.Sender, BootID: hb.BootID, HTTPAddr: hb.HTTPAddr, StartedAt: hb.StartedAt,
		FirstSeen: now, LastSeen: now}
	m.live[hb.Sender] = mem
	kind := MemberJoined
	if isLive {
		kind = MemberRestarted
	}
	obs.Change = MemberChange{Kind: kind, Member: *mem}
	return obs
}

// Expire removes members whose last heartbeat is more than ExpiryAfter
// before now and returns them as MemberExpired changes, sorted by id.
// Their boot ids stay current: a partitioned replica that comes back with
// the same boot is the same incarnation.
func (m *Members) Expire(now time.Time) []MemberChange {
	return m.ExpireSince(now, time.Time{})
}

// ExpireSince is Expire with silence counted from floor when a member's last heartbeat is
// older: a replica that was itself cut off from the bus until floor heard nobody meanwhile, and
// its members get a full expiry interval from floor to be heard again.
func (m *Members) ExpireSince(now, floor time.Time) []MemberChange {
	var out []MemberChange
	limit := m.ExpiryAfter()
	for id, mem := range m.live {
		last := mem.LastSeen
		if floor.After(last) {
			last = floor
		}
		if now.Sub(last) > limit {
			delete(m.live, id)
			delete(m.aliases, id)
			out = append(out, MemberChange{Kind: MemberExpired, Member: *mem})
		}
	}
	slices.SortFunc(out, func(a, b MemberChange) int { return strings.Compare(a.Member.ID, b.Member.ID) })
	return out
}

// IsLive reports whether id is a live member.
func (m *Members) IsLive(id string) bool {
	_, ok := m.live[id]
	return ok
}

// Get returns the live member id.
func (m *Members) Get(id string) (Member, bool) {
	mem, ok := m.live[id]
	if !ok {
		return Member{}, false
	}
	return *mem, true
}

// Live returns copies of the live members sorted by id.
func (m *Members) Live() []Member {
	out := make([]Member, 0, len(m.live))
	for _, mem := range m.live {
		out = append(out, *mem)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Len returns the number of live members.
func (m *Members) Len() int { return len(m.live) }
