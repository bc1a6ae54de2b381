package engine

// Multi-replica scripts (testdata/repl/*.txt): two or three engines exchange what their
// replicators would publish, as the bus would carry it. Every effect a replica's command produces
// is converted to its bus message (bus.Lifecycle, bus.Affinity), encoded with the bus codec and
// queued on a FIFO link to every other replica; heartbeats and live sets are queued by commands.
// Nothing moves until the script says `deliver`, and `drop`, `dup` and `reorder` edit a link's
// queue, so lost, duplicated and reordered messages are explicit. Delivery decodes the bytes and
// applies them the way core's BusReplicator does: the sender's boot id is checked in the
// receiver's bus.Members (a retired boot is dropped; a new boot first drops the peer's mirrored
// bookings), lifecycle events go to ApplyReplica, bindings to ApplyAffinity, a live set to
// DropPeerExcept, and `expire` releases the bookings of members silent past the expiry (core's
// dead-peer release). One virtual clock (`tick`) serves every replica. testdata/README.md lists
// the commands.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kvselect/kvselect/bus"
)

// TestReplicaScripts runs every multi-replica script.
func TestReplicaScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/repl", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			t.Skip("not a script")
		}
		c := &cluster{t: t, now: t0}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			c.t = t
			return c.run(cmdOf(t, d))
		})
	})
}

// replica is one engine with its identity and its view of the bus's members.
type replica struct {
	name    string
	boot    uint64
	s       *scriptState
	members *bus.Members
}

// wireMsg is one encoded message in flight on a link.
type wireMsg struct {
	data []byte
	desc string
}

// cluster is the replicas, the links between them and the shared clock.
type cluster struct {
	t     testing.TB
	now   time.Time
	cfg   scriptCmd // the `replicas` command: its config arguments apply to restarts too
	reps  []*replica
	links map[[2]string][]wireMsg // (from, to) → FIFO queue
	boots uint64
}

func (c *cluster) rep(name string) *replica {
	for _, r := range c.reps {
		if r.name == name {
			return r
		}
	}
	c.t.Fatalf("no replica %q", name)
	return nil
}

// start (re)creates replica r's engine with a new boot id.
func (c *cluster) start(r *replica) string {
	c.boots++
	r.boot = c.boots
	r.s = &scriptState{t: c.t, now: c.now}
	out := r.s.run(scriptCmd{t: c.t, name: "new", args: c.cfg.args, pos: c.cfg.pos})
	return fmt.Sprintf("%s boot=%d %s", r.name, r.boot, out)
}

func (c *cluster) run(cmd scriptCmd) string {
	switch cmd.name {
	case "replicas":
		c.cfg, c.reps, c.links, c.now, c.boots = cmd, nil, map[[2]string][]wireMsg{}, t0, 0
		var out []string
		for _, n := range cmd.flags {
			r := &replica{name: n, members: bus.NewMembers(time.Second, bus.DefaultMissedBeats)}
			c.reps = append(c.reps, r)
			out = append(out, c.start(r))
		}
		return strings.Join(out, "\n")
	case "restart":
		return c.start(c.rep(cmd.str("replica", "")))
	case "tick":
		d, err := time.ParseDuration(cmd.flags[0])
		if err != nil {
			cmd.fatalf("bad duration")
		}
		c.now = c.now.Add(d)
		return fmt.Sprintf("now t0+%s", c.now.Sub(t0))
	case "all":
		var out []string
		for _, r := range c.reps {
			out = append(out, r.name+": "+c.on(r, subCmd(cmd)))
		}
		return strings.Join(out, "\n")
	case "heartbeat":
		r := c.rep(cmd.str("from", ""))
		return c.publish(r, &bus.Heartbeat{StartedAt: c.now.UnixNano()}, "heartbeat")
	case "announce":
		return c.announce(c.rep(cmd.str("from", "")))
	case "wire":
		var out []string
		for _, k := range c.linkKeys() {
			for i, m := range c.links[k] {
				out = append(out, fmt.Sprintf("%s->%s #%d %s", k[0], k[1], i+1, m.desc))
			}
		}
		return orNone(out)
	case "deliver":
		return c.deliver(cmd)
	case "drop", "dup", "reorder":
		k := [2]string{cmd.str("from", ""), cmd.str("to", "")}
		q := c.links[k]
		if len(q) == 0 {
			cmd.fatalf("link %s->%s is empty", k[0], k[1])
		}
		switch cmd.name {
		case "drop":
			n := min(int(cmd.num("n", 1)), len(q))
			c.links[k] = q[n:]
			return fmt.Sprintf("dropped %d", n)
		case "dup":
			c.links[k] = append([]wireMsg{q[0]}, q...)
			return "duplicated " + q[0].desc
		}
		slices.Reverse(q)
		return fmt.Sprintf("reversed %d", len(q))
	case "expire":
		return c.expire(c.rep(cmd.str("on", "")))
	case "recover":
		return c.recoverCmd(cmd)
	}
	for _, r := range c.reps {
		if r.name == cmd.name {
			return c.on(r, subCmd(cmd))
		}
	}
	cmd.fatalf("unknown command")
	return ""
}

// subCmd is the engine command a replica-prefixed line carries ("a free id=x" → "free id=x").
func subCmd(cmd scriptCmd) scriptCmd {
	if len(cmd.flags) == 0 {
		cmd.fatalf("which command?")
	}
	cmd.name, cmd.flags = cmd.flags[0], cmd.flags[1:]
	return cmd
}

// on runs one single-engine command on r at the cluster's time, then publishes r's effects.
func (c *cluster) on(r *replica, cmd scriptCmd) string {
	if cmd.name == "tick" || cmd.name == "new" || cmd.name == "effects" {
		cmd.fatalf("%s is a cluster command here (effects are published)", cmd.name)
	}
	r.s.t, r.s.now = c.t, c.now
	out := r.s.run(cmd)
	var pub []string
	fx, aff := takeOutbox(r.s.e)
	for _, ev := range fx {
		pub = append(pub, c.publish(r, lifecycleMsg(&ev), effectSummary(&ev, false)))
	}
	for _, ev := range aff {
		pub = append(pub, c.publish(r, &bus.Affinity{Model: ev.Partition.Model, Group: ev.Partition.Group,
			SessionID: ev.SessionID, Owner: ev.Owner, HasRank: true,
			Sequence: ev.Sequence, Writer: ev.Writer}, affinityLine(&ev)))
	}
	return strings.Join(append([]string{out}, pub...), "\n")
}

// publish stamps m with r's identity, encodes it and queues it to every other replica.
func (c *cluster) publish(r *replica, m bus.Message, desc string) string {
	switch v := m.(type) {
	case *bus.Lifecycle:
		v.Sender, v.BootID = r.name, r.boot
	case *bus.Affinity:
		v.Sender, v.BootID = r.name, r.boot
	case *bus.LiveSet:
		v.Sender, v.BootID = r.name, r.boot
	case *bus.Heartbeat:
		v.Sender, v.BootID = r.name, r.boot
	}
	data, err := bus.Marshal(m)
	if err != nil {
		c.t.Fatalf("encode %s: %v", desc, err)
	}
	for _, to := range c.reps {
		if to != r {
			k := [2]string{r.name, to.name}
			c.links[k] = append(c.links[k], wireMsg{data: data, desc: desc})
		}
	}
	return "  published " + desc
}

// announce queues r's live set: per partition, the ids of r's own bookings, sorted.
func (c *cluster) announce(r *replica) string {
	sets := map[PartitionKey][]string{}
	for key := range r.s.e.parts {
		sets[key] = nil
	}
	for id, row := range r.s.e.resv {
		if !row.fromPeer {
			sets[row.key] = append(sets[row.key], id)
		}
	}
	var out []string
	for _, key := range sortedKeys(sets) {
		ids := sets[key]
		slices.Sort(ids)
		c.boots++ // a fresh set id
		out = append(out, c.publish(r, &bus.LiveSet{Model: key.Model, Group: key.Group, SetID: c.boots, Chunks: 1, IDs: ids},
			fmt.Sprintf("live set %s/%s %v", key.Model, key.Group, ids)))
	}
	return orNone(out)
}

func sortedKeys[V any](m map[PartitionKey]V) []PartitionKey {
	keys := make([]PartitionKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b PartitionKey) int { return strings.Compare(a.Model+"\x00"+a.Group, b.Model+"\x00"+b.Group) })
	return keys
}

func (c *cluster) linkKeys() [][2]string {
	var keys [][2]string
	for k, q := range c.links {
		if len(q) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+">"+a[1], b[0]+">"+b[1]) })
	return keys
}

// deliver hands queued messages to their receivers, oldest first per link and links in name
// order: every message, or those of from=/to= (n= caps the count per link).
func (c *cluster) deliver(cmd scriptCmd) string {
	var out []string
	for _, k := range c.linkKeys() {
		if (cmd.has("from") && k[0] != cmd.str("from", "")) || (cmd.has("to") && k[1] != cmd.str("to", "")) {
			continue
		}
		q := c.links[k]
		n := min(int(cmd.num("n", uint64(len(q)))), len(q))
		c.links[k] = q[n:]
		for _, m := range q[:n] {
			out = append(out, fmt.Sprintf("%s->%s %s: %s", k[0], k[1], m.desc, c.receive(c.rep(k[1]), m.data)))
		}
	}
	return orNone(out)
}

// receive decodes and applies one message on r, as core's BusReplicator would.
func (c *cluster) receive(r *replica, data []byte) string {
	m, err := bus.DecodeEnvelope(data)
	if err != nil {
		c.t.Fatalf("decode: %v", err)
	}
	e := r.s.e
	if hb, ok := m.(*bus.Heartbeat); ok {
		obs := r.members.Observe(hb, c.now)
		out := "boot " + obs.Verdict.String()
		if obs.Verdict == bus.BootRestarted {
			out += fmt.Sprintf(", dropped %d mirrored", e.DropPeer(hb.Sender))
		}
		return out
	}
	sender, boot := m.Origin()
	v, _ := r.members.CheckBoot(sender, boot)
	prefix := ""
	switch v {
	case bus.BootRetired:
		return "dropped (retired boot)"
	case bus.BootRestarted:
		prefix = fmt.Sprintf("peer restarted, dropped %d mirrored; ", e.DropPeer(sender))
	}
	switch m := m.(type) {
	case *bus.Lifecycle:
		return prefix + appliedWord(e.ApplyReplica(replicaEvent(m), c.now))
	case *bus.Affinity:
		return prefix + appliedWord(e.ApplyAffinity(&AffinityEvent{Partition: PartitionKey{Model: m.Model, Group: m.Group},
			SessionID: m.SessionID, Owner: m.Owner, Sequence: m.Sequence, Writer: m.Writer, Sender: m.Sender}, c.now))
	case *bus.LiveSet:
		keep := map[string]struct{}{}
		for _, id := range m.IDs {
			keep[id] = struct{}{}
		}
		return prefix + fmt.Sprintf("freed %v", e.DropPeerExcept(m.Sender, PartitionKey{Model: m.Model, Group: m.Group}, keep, nil))
	}
	c.t.Fatalf("unexpected message %T", m)
	return ""
}

// expire releases, on r, the bookings of every member silent past the expiry.
func (c *cluster) expire(r *replica) string {
	var out []string
	for _, ch := range r.members.Expire(c.now) {
		out = append(out, fmt.Sprintf("%s %s, released %d", ch.Member.ID, ch.Kind, r.s.e.DropPeer(ch.Member.ID)))
	}
	return orNone(out)
}

func appliedWord(ok bool) string {
	if ok {
		return "applied"
	}
	return "dropped"
}

// lifecycleMsg is the bus message of a replica event (core/replication.go's conversion).
func lifecycleMsg(ev *ReplicaEvent) *bus.Lifecycle {
	lc := &bus.Lifecycle{Model: ev.Partition.Model, Group: ev.Partition.Group, BlockSize: ev.BlockSize,
		RequestID: ev.RequestID, Owner: ev.Owner}
	switch ev.Kind {
	case LifecycleAdd:
		a := ev.Add
		lc.Kind = bus.LifecycleAdd
		lc.Add = &bus.AddData{TokenSequence: a.TokenSequence, TrackPrefill: a.TrackPrefill, PrefillTokens: a.PrefillTokens,
			ExpectedOutputTokens: a.ExpectedOutputTokens, LoraName: a.LoraName, ISL: a.ISL, Republish: a.Republish}
	case LifecyclePrefillComplete:
		lc.Kind = bus.LifecyclePrefillComplete
	default:
		lc.Kind = bus.LifecycleFree
	}
	return lc
}

// replicaEvent is the engine event of a received lifecycle message.
func replicaEvent(lc *bus.Lifecycle) *ReplicaEvent {
	ev := &ReplicaEvent{Partition: PartitionKey{Model: lc.Model, Group: lc.Group}, BlockSize: lc.BlockSize,
		RequestID: lc.RequestID, Owner: lc.Owner, Sender: lc.Sender}
	switch lc.Kind {
	case bus.LifecycleAdd:
		ev.Kind = LifecycleAdd
		if a := lc.Add; a != nil {
			ev.Add = &ReplicaAdd{TokenSequence: a.TokenSequence, TrackPrefill: a.TrackPrefill, PrefillTokens: a.PrefillTokens,
				ExpectedOutputTokens: a.ExpectedOutputTokens, LoraName: a.LoraName, ISL: a.ISL, Republish: a.Republish}
		}
	case bus.LifecyclePrefillComplete:
		ev.Kind = LifecyclePrefillComplete
	default:
		ev.Kind = LifecycleFree
	}
	return ev
}

// TestDeterministicReplicaScripts replays every multi-replica script on fresh clusters and
// compares the transcripts: every output, publication and delivery, in order.
func TestDeterministicReplicaScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/repl/*.txt")
	noErr(t, err)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cmds := readScriptCmds(t, f)
			run := func() []string {
				c := &cluster{t: t, now: t0}
				out := make([]string, 0, len(cmds))
				for _, cmd := range cmds {
					out = append(out, cmd.pos+" "+c.run(cmd))
				}
				return out
			}
			want := run()
			for range detRuns {
				if got := run(); !slices.Equal(got, want) {
					t.Fatalf("transcripts differ:\n%s\n----\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}
