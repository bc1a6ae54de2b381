package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// Engine-level tests of router-queue admission: SelectQueued parks, Drain* dispatch, and every
// outcome comes out of the one outbox (Ready.Admitted). No goroutines: the order is a pure
// function of the calls.

// queueEngine is an engine with one worker of 100 batched tokens (block size 4) and router
// queueing under pol (nil: router_queue_threshold 0 and router_queue_policy order): a rank is
// busy while any booked prompt token awaits prefill, so dispatches go one at a time.
func queueEngine(t *testing.T, order string, pol *Policies) *Engine {
	t.Helper()
	c := DefaultConfig()
	c.QueueThreshold, c.QueuePolicy = ptr(0.0), order
	e, err := New(c, Options{Rand: rand.New(rand.NewPCG(7, 11)), Policies: pol})
	noErr(t, err)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(100)) }))
	return e
}

// hashReq is a select_and_reserve of isl uncached tokens (unique hashes) in policy class class.
func hashReq(id string, isl uint64, class string) *SelectRequest {
	n := int((isl + 3) / 4)
	hs := make([]int64, n)
	for i := range hs {
		hs[i] = int64(len(id))<<40 | int64(id[0])<<32 | int64(i+1)
		for _, c := range id {
			hs[i] = hs[i]*31 + int64(c)
		}
	}
	return &SelectRequest{SelectionID: ptr(id), PolicyClass: class,
		Prompt: Prompt{BlockHashes: hs, SequenceHashes: hs, ISLTokens: ptr(isl)}}
}

// queueScript books "big", parks reqs behind it and then completes prefills one at a time,
// recording the selection ids in admission order and every admission.
func queueScript(t *testing.T, e *Engine, reqs []*SelectRequest) (string, []Admission) {
	t.Helper()
	now := t0
	var out Ready
	if _, tk, err := e.SelectQueued(hashReq("big", 60, ""), true, now); err != nil || tk != 0 {
		t.Fatalf("big: ticket %d, %v", tk, err)
	}
	names := map[Ticket]string{}
	for i, r := range reqs {
		_, tk, err := e.SelectQueued(r, true, now.Add(time.Duration(i)*time.Millisecond))
		if err != nil || tk == 0 {
			t.Fatalf("%s: ticket %d, %v", *r.SelectionID, tk, err)
		}
		names[tk] = *r.SelectionID
	}
	e.TakeReady(&out)
	if len(out.Admitted) != 0 || e.QueueLen() != len(reqs) {
		t.Fatalf("parked requests admitted early: %+v (queue %d)", out.Admitted, e.QueueLen())
	}
	order, last, all := "", "big", []Admission(nil)
	for step := 0; e.QueueLen() > 0; step++ {
		now = now.Add(time.Second)
		noErr(t, e.PrefillCompleteAt(last, now))
		e.DrainQueue(now)
		e.TakeReady(&out)
		if len(out.Admitted) != 1 {
			t.Fatalf("step %d: %d admissions, want 1 (one rank, threshold 0)", step, len(out.Admitted))
		}
		a := out.Admitted[0]
		if a.Err != nil || !a.Dispatched || a.Resp == nil {
			t.Fatalf("step %d: admission %+v", step, a)
		}
		last = names[a.Ticket]
		order += last + " "
		all = append(all, a)
	}
	return order, all
}

func TestSelectQueuedOrderIsDeterministic(t *testing.T) {
	reqs := func() []*SelectRequest {
		return []*SelectRequest{hashReq("a", 40, ""), hashReq("b", 8, ""), hashReq("c", 20, "")}
	}
	for _, tc := range []struct{ order, want string }{
		{"fcfs", "a b c "},
		{"lcfs", "c b a "},
		{"wspt", "b c a "},
	} {
		t.Run(tc.order, func(t *testing.T) {
			got, first := queueScript(t, queueEngine(t, tc.order, nil), reqs())
			if got != tc.want {
				t.Fatalf("admission order %q, want %q", got, tc.want)
			}
			_, again := queueScript(t, queueEngine(t, tc.order, nil), reqs())
			if !reflect.DeepEqual(first, again) {
				t.Fatalf("the same script admitted differently:\n%+v\n%+v", first, again)
			}
		})
	}
}

// TestSelectQueuedDeficitRoundRobin: the DRR order of TestDeficitRoundRobin, produced by the
// engine's own admission with real busy checks.
func TestSelectQueuedDeficitRoundRobin(t *testing.T) {
	ps, err := ParsePolicies([]byte(`
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
policy_classes:
  - {name: a, quantum: 100, prefill_busy_threshold: 0}
  - {name: b, quantum: 300, prefill_busy_threshold: 0}
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 1}
`))
	noErr(t, err)
	var reqs []*SelectRequest
	for _, n := range []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"} {
		reqs = append(reqs, hashReq(n, 100, n[:1]))
	}
	e := queueEngine(t, "fcfs", ps)
	// big is in the default family, whose class has no threshold: it never parks.
	if got, want := func() string { s, _ := queueScript(t, e, reqs); return s }(), "a1 b1 b2 b3 a2 b4 a3 a4 "; got != want {
		t.Fatalf("admission order %q, want %q", got, want)
	}
	if e.QueueByClass() != nil || e.ParkedIDs() != 0 {
		t.Fatalf("queue not empty: %v, %d ids", e.QueueByClass(), e.ParkedIDs())
	}
}

// TestSelectQueuedClassBudget: a class's queue limit (per worker) refuses the request that
// would exceed it with 429 and its details, and frees up when a parked request leaves.
func TestSelectQueuedClassBudget(t *testing.T) {
	ps, err := ParsePolicies([]byte(`
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
policy_classes:
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 1, prefill_busy_threshold: 0, request_queue_limit_per_worker: 2}
`))
	noErr(t, err)
	e := queueEngine(t, "fcfs", ps)
	if _, tk, err := e.SelectQueued(hashReq("big", 60, ""), true, t0); err != nil || tk != 0 {
		t.Fatalf("big: %d, %v", tk, err)
	}
	var tickets []Ticket
	for i := range 2 {
		_, tk, err := e.SelectQueued(hashReq("p"+strconv.Itoa(i), 8, ""), true, t0)
		noErr(t, err)
		tickets = append(tickets, tk)
	}
	_, tk, err := e.SelectQueued(hashReq("over", 8, ""), true, t0)
	var qe *Error
	if !errors.Is(err, ErrOverloaded) || tk != 0 || !errors.As(err, &qe) ||
		qe.Details != (QueueRejection{PolicyClass: "fs", LimitKind: "requests", Current: 2, Limit: 2}) {
		t.Fatalf("third park: ticket %d, %v; want 429 with the class's request limit", tk, err)
	}
	// A parked id is "being reserved": a duplicate is refused, parked or immediate.
	if _, _, err := e.SelectQueued(hashReq("p0", 8, ""), true, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate of a parked id: %v, want 409", err)
	}
	if _, err := e.SelectClassified(hashReq("p1", 8, ""), true, t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("immediate duplicate of a parked id: %v, want 409", err)
	}
	if !e.Abandon(tickets[0], t0) || e.Abandon(tickets[0], t0) {
		t.Fatal("Abandon must succeed once")
	}
	if _, tk, err := e.SelectQueued(hashReq("again", 8, ""), true, t0); err != nil || tk == 0 {
		t.Fatalf("after an abandon the class has room: %d, %v", tk, err)
	}
	// Shutdown ends the rest in park order, undispatched.
	fail := errors.New("closing")
	e.FailQueue(fail)
	var out Ready
	e.TakeReady(&out)
	got := ""
	for _, a := range out.Admitted {
		if a.Dispatched || a.Err != fail {
			t.Fatalf("failed admission %+v", a)
		}
		got += fmt.Sprint(a.Ticket > tickets[0], " ")
	}
	if got != "true true " || e.QueueLen() != 0 || e.ParkedIDs() != 0 {
		t.Fatalf("FailQueue left %d parked (%s)", e.QueueLen(), got)
	}
}

// TestDispatchProbesUseTheParkedPrompt: a parked request is probed with the prompt normalised
// when it parked; the caller's copy is not re-hashed (here it is emptied after parking, so a
// re-hash would fail validation and dispatch it with an error).
func TestDispatchProbesUseTheParkedPrompt(t *testing.T) {
	e := queueEngine(t, "fcfs", nil)
	if _, _, err := e.SelectQueued(hashReq("big", 60, ""), true, t0); err != nil {
		t.Fatal(err)
	}
	r := hashReq("late", 8, "")
	_, tk, err := e.SelectQueued(r, true, t0)
	if err != nil || tk == 0 {
		t.Fatalf("park: %d, %v", tk, err)
	}
	w := e.rq.tickets[tk]
	r.Prompt = Prompt{} // what a re-hash would see
	if e.dispatchable(w) {
		t.Fatal("a busy rank reported room: the probe did not use the parked prompt")
	}
	probe, _, err := e.probeQueue(r, &w.prompt)
	if err != nil || probe.ISL != 8 || !probe.Busy {
		t.Fatalf("probe of the parked prompt: %+v, %v", probe, err)
	}
}
