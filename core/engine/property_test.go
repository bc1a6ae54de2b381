package engine

// Property test: random operation sequences from a seeded source drive the engine and a naive
// model side by side. After every operation the test checks that
//
//   - nothing panicked and every error wraps a sentinel;
//   - the outcome (success or which sentinel) matches the model's prediction;
//   - reservation rows exist iff the partition's tracker holds the booking, on the same owner;
//   - no load counter underflowed, and /loads equals a naive recount of the live bookings:
//     requests per rank, prefill tokens of bookings whose prefill is not complete, and decode
//     blocks = distinct prompt hashes per rank + output blocks.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// modelWorker is the model's view of a catalog entry.
type modelWorker struct {
	key         PartitionKey
	start, size uint32
	ok          bool // schedulable
}

func (w modelWorker) has(r uint32) bool { return w.ok && r >= w.start && r < w.start+w.size }

// modelBooking is one live booking in the model.
type modelBooking struct {
	key      PartitionKey
	owner    kvwire.Owner
	hashes   []uint64
	prefill  uint64
	done     bool
	outputs  uint64
	admitted time.Time
}

type propModel struct {
	workers  map[uint64]modelWorker
	bookings map[string]*modelBooking
}

func (m *propModel) ready(key PartitionKey) bool {
	for _, w := range m.workers {
		if w.ok && w.key == key {
			return true
		}
	}
	return false
}

func (m *propModel) anyReady() bool {
	for _, w := range m.workers {
		if w.ok {
			return true
		}
	}
	return false
}

// reconcile applies the booking-survival rule of an upsert/delete (next == nil: deleted).
func (m *propModel) reconcile(id uint64, next *modelWorker) {
	for bid, b := range m.bookings {
		if b.owner.Worker != id {
			continue
		}
		if next == nil || !next.has(b.owner.Rank) || next.key != b.key {
			delete(m.bookings, bid)
		}
	}
	if next == nil {
		delete(m.workers, id)
	} else {
		m.workers[id] = *next
	}
}

// TestPropertyRandomOps runs several seeds of random operation sequences.
func TestPropertyRandomOps(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	steps := 2500
	if testing.Short() {
		seeds, steps = seeds[:2], 800
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runRandomOps(t, seed, steps) })
	}
}

func runRandomOps(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
	e, err := New(DefaultConfig(), Options{Rand: rand.New(rand.NewPCG(seed, 1))})
	noErr(t, err)
	m := &propModel{workers: map[uint64]modelWorker{}, bookings: map[string]*modelBooking{}}
	keys := []PartitionKey{defKey, {Model: "m2", Group: DefaultName}}
	// A few shared prefixes with random tails, so prompts share tracking hashes.
	prefixes := [][]uint32{toks(0, 16), toks(1000, 32), toks(5000, 8)} // 4, 8 and 2 blocks
	prompt := func() []uint32 {
		p := prefixes[rng.IntN(len(prefixes))]
		p = p[:rng.IntN(len(p)+1)]
		return cat(p, toks(10_000+rng.IntN(50)*10, rng.IntN(12)))
	}
	now := t0
	nextID := 0
	// liveID picks a live booking id, or (1 in 8) an unknown one to exercise the 404 paths.
	liveID := func() string {
		if len(m.bookings) == 0 || rng.IntN(8) == 0 {
			return fmt.Sprint("ghost", rng.IntN(3))
		}
		ids := make([]string, 0, len(m.bookings))
		for id := range m.bookings {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids[rng.IntN(len(ids))]
	}
	// expect checks an outcome against the model's prediction (nil = success).
	expect := func(step int, op string, err error, want error) {
		t.Helper()
		if err != nil && sentinelName(err) == "" {
			t.Fatalf("step %d %s: error %v wraps no sentinel", step, op, err)
		}
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("step %d %s: got error %v, model expects %v", step, op, err, want)
		}
	}

	booked, expired := 0, 0
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(100); {
		// Operation mix (per 100): 12 upserts, 3 deletes, 5 KV-event stores, 30 atomic bookings,
		// 8 explicit bookings, 12 prefill completions, 10 output blocks, 15 frees, 5 clock steps.
		case op < 12: // register / re-register
			id := uint64(1 + rng.IntN(6))
			key := keys[rng.IntN(len(keys))]
			start, size := uint32(rng.IntN(3)), uint32(1+rng.IntN(3))
			s := spec(id, inModel(key.Model, key.Group), dp(start, size))
			// One upsert in six is incomplete (no endpoint): the worker leaves its partition and
			// its bookings go; a re-pointed rank keeps its bookings (only blocks are dropped).
			ok := rng.IntN(6) != 0
			if !ok {
				s.Endpoint = nil
			}
			if rng.IntN(3) == 0 { // re-point one rank: its blocks go, its bookings stay
				s.KVEventsEndpoints[fmt.Sprint(start)] = fmt.Sprintf("tcp://moved%d:1", rng.IntN(100))
			}
			rec, err := e.UpsertWorker(s)
			expect(step, "upsert", err, nil)
			if (rec.Lifecycle == LifecycleSchedulable) != ok {
				t.Fatalf("step %d: worker %d lifecycle %s, model ok=%v (%q)", step, id, rec.Lifecycle, ok, rec.NotSchedulableReasons)
			}
			m.reconcile(id, &modelWorker{key: key, start: start, size: size, ok: ok})
		case op < 15: // delete
			id := uint64(1 + rng.IntN(7))
			_, err := e.DeleteWorker(id)
			var want error
			if _, ok := m.workers[id]; !ok {
				want = ErrNotFound
			}
			expect(step, "delete", err, want)
			if want == nil {
				m.reconcile(id, nil)
			}
		case op < 20: // KV events
			id := uint64(1 + rng.IntN(6))
			w := m.workers[id]
			if w.ok {
				o := kvwire.Owner{Worker: id, Rank: w.start + uint32(rng.IntN(int(w.size)))}
				e.ApplyKVEvents(o, []KVEvent{storedEvent(o, TierOf("device"), nil, prompt(), 4)})
			}
		case op < 50: // select_and_reserve
			key := keys[rng.IntN(len(keys))]
			id := fmt.Sprint("r", nextID)
			if len(m.bookings) > 0 && rng.IntN(10) == 0 {
				id = liveID() // a duplicate
			}
			nextID++
			req := &SelectRequest{ModelName: ptr(key.Model), RoutingGroup: ptr(key.Group), SelectionID: ptr(id), Prompt: tokenPrompt(prompt())}
			// An empty prompt takes the hash path with empty lists (allowed: isl > 0).
			if len(req.Prompt.TokenIDs) == 0 {
				req.Prompt = Prompt{BlockHashes: []int64{}, SequenceHashes: []int64{}, ISLTokens: ptr(uint64(1 + rng.IntN(9)))}
			}
			if rng.IntN(4) == 0 {
				req.RouterConfigOverride = &ConfigOverride{TrackPrefillTokens: ptr(false)}
			}
			resp, err := e.SelectAndReserve(req, now)
			// The id conflict is checked before readiness (spec §5.1 step 2 follows step 1, but a
			// conflict needs a live booking, which implies a ready partition).
			var want error
			switch _, dup := m.bookings[id]; {
			case dup:
				want = ErrConflict
			case !m.ready(key):
				want = ErrNotReady
			}
			expect(step, "select_and_reserve", err, want)
			// A booking must land on a schedulable rank of the requested partition; the model
			// records the booked tracking hashes and the prefill it will owe.
			if err == nil {
				o := kvwire.Owner{Worker: resp.WorkerID, Rank: resp.DPRank}
				if w := m.workers[o.Worker]; !w.has(o.Rank) || w.key != key {
					t.Fatalf("step %d: booked on %v, not a schedulable rank of %v", step, o, key)
				}
				b := &modelBooking{key: key, owner: o, admitted: now}
				for _, h := range resp.SequenceHashes {
					b.hashes = append(b.hashes, uint64(h))
				}
				if resp.TrackPrefillTokens {
					b.prefill = resp.EffectivePrefillTokens
				}
				m.bookings[id] = b
				booked++
			}
		case op < 58: // explicit reservation (sometimes on an unknown worker or rank)
			id := uint64(1 + rng.IntN(7))
			w, known := m.workers[id]
			key := w.key
			if !known {
				key = defKey
			}
			rank := w.start + uint32(rng.IntN(int(w.size)+2))
			sid := fmt.Sprint("x", nextID)
			nextID++
			pr := cat(toks(7, 1), prompt()) // at least one token
			// An explicit prefill hint in [0, isl] makes the booked prefill exact for the model.
			ept := uint64(rng.IntN(len(pr) + 1))
			req := &ReservationRequest{SelectionID: ptr(sid), ModelName: ptr(key.Model), RoutingGroup: ptr(key.Group),
				WorkerID: ptr(id), DPRank: ptr(rank), Prompt: tokenPrompt(pr), EffectivePrefillTokens: ptr(ept)}
			_, err := e.Reserve(req, now)
			var want error
			switch {
			case !m.ready(key):
				want = ErrNotReady
			case !w.has(rank):
				want = ErrNotFound
			}
			expect(step, "reserve", err, want)
			if err == nil {
				m.bookings[sid] = &modelBooking{key: key, owner: kvwire.Owner{Worker: id, Rank: rank}, hashes: kvhashSeq(pr), prefill: ept, admitted: now}
			}
		case op < 70: // prefill_complete
			id := liveID()
			err := e.PrefillComplete(id)
			b, ok := m.bookings[id]
			expect(step, "prefill_complete", err, map[bool]error{true: nil, false: ErrNotFound}[ok])
			if ok {
				b.done = true
			}
		case op < 80: // output_block
			id := liveID()
			err := e.OutputBlock(id, nil)
			b, ok := m.bookings[id]
			expect(step, "output_block", err, map[bool]error{true: nil, false: ErrNotFound}[ok])
			if ok {
				b.outputs++
			}
		case op < 95: // free
			id := liveID()
			err := e.Free(id)
			_, ok := m.bookings[id]
			expect(step, "free", err, map[bool]error{true: nil, false: ErrNotFound}[ok])
			delete(m.bookings, id)
		// Bookings admitted strictly before now − 300 s expire; the count must match the model.
		default: // time passes; the sweep expires old bookings
			now = now.Add(time.Duration(rng.IntN(200)) * time.Second)
			freed := e.Sweep(now)
			want := 0
			for id, b := range m.bookings {
				if b.admitted.Before(now.Add(-300 * time.Second)) {
					delete(m.bookings, id)
					want++
				}
			}
			if freed != want {
				t.Fatalf("step %d: sweep freed %d, model %d", step, freed, want)
			}
			expired += freed
		}
		_ = e.TakeEffects(nil)
		checkInvariants(t, step, e, m)
		if !m.anyReady() && e.SchedulableCount() != 0 {
			t.Fatalf("step %d: SchedulableCount %d with no schedulable model worker", step, e.SchedulableCount())
		}
	}
	// Guard against a vacuous run: the sequence must actually book and expire requests.
	if booked < steps/10 || expired == 0 {
		t.Fatalf("weak run: %d bookings, %d expiries in %d steps", booked, expired, steps)
	}
	t.Logf("%d steps: %d select_and_reserve bookings, %d expiries, %d live at the end", steps, booked, expired, len(m.bookings))
}

// checkInvariants compares the engine's reservation index and /loads with the model.
func checkInvariants(t *testing.T, step int, e *Engine, m *propModel) {
	t.Helper()
	// Rows ⇔ bookings: same count, and every row's booking lives in its partition's tracker on
	// the row's owner (and in the model).
	live := 0
	for _, p := range e.parts {
		live += p.tracker.Len()
	}
	if live != len(e.resv) || len(e.resv) != len(m.bookings) {
		t.Fatalf("step %d: %d tracker bookings, %d rows, model %d", step, live, len(e.resv), len(m.bookings))
	}
	for id, r := range e.resv {
		p := e.parts[r.key]
		if p == nil {
			t.Fatalf("step %d: row %s names a missing partition", step, id)
		}
		o, ok := p.tracker.Lookup(id)
		if !ok || o != r.owner {
			t.Fatalf("step %d: row %s on %v, tracker %v/%v", step, id, r.owner, o, ok)
		}
		if b := m.bookings[id]; b == nil || b.owner != r.owner || b.key != r.key {
			t.Fatalf("step %d: row %s %+v, model %+v", step, id, r, b)
		}
	}
	// Naive recount of /loads: prompt blocks are de-duplicated per rank by tracking hash (the
	// prefixes above make bookings share them); output blocks are private, weight 1.
	type acc struct {
		requests, prefill, outputs uint64
		hashes                     map[uint64]bool
	}
	want := map[PartitionKey]map[kvwire.Owner]*acc{}
	for _, b := range m.bookings {
		if want[b.key] == nil {
			want[b.key] = map[kvwire.Owner]*acc{}
		}
		a := want[b.key][b.owner]
		if a == nil {
			a = &acc{hashes: map[uint64]bool{}}
			want[b.key][b.owner] = a
		}
		a.requests++
		a.outputs += b.outputs
		if !b.done {
			a.prefill += b.prefill
		}
		for _, h := range b.hashes {
			a.hashes[h] = true
		}
	}
	for _, pl := range e.Loads("", "") {
		key := PartitionKey{Model: pl.ModelName, Group: pl.RoutingGroup}
		for _, l := range pl.Loads {
			// uint64 counters cannot go negative; an underflow shows as an absurd value.
			if l.PotentialDecodeBlocks > 1<<40 || l.PotentialPrefillTokens > 1<<40 || l.ActiveRequests > 1<<40 {
				t.Fatalf("step %d: load underflow %+v", step, l)
			}
			o := kvwire.Owner{Worker: l.WorkerID, Rank: l.DPRank}
			if w := m.workers[o.Worker]; !w.has(o.Rank) || w.key != key {
				t.Fatalf("step %d: /loads lists %v in %v, not a schedulable rank there", step, o, key)
			}
			a := want[key][o]
			if a == nil {
				a = &acc{}
			}
			if l.ActiveRequests != a.requests || l.PotentialPrefillTokens != a.prefill || l.PotentialDecodeBlocks != uint64(len(a.hashes))+a.outputs {
				t.Fatalf("step %d: %v load %s, naive (%d,%d,%d)", step, o, triple(l), a.requests, uint64(len(a.hashes))+a.outputs, a.prefill)
			}
			delete(want[key], o)
		}
	}
	for key, owners := range want {
		if len(owners) != 0 {
			t.Fatalf("step %d: bookings on ranks missing from /loads in %v: %v", step, key, owners)
		}
	}
}
