package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPrehashMatchesInline: a prompt hashed outside the lock (HashPlan + Prehash) books
// exactly what the same prompt hashed inside the engine books, for token prompts (public and
// keyed tracking, lora, salt, eagle override, assume_kv_reuse off) and explicit hashes; and a
// plan made before the partition changed shape is ignored rather than used.
func TestPrehashMatchesInline(t *testing.T) {
	keyed := DefaultConfig()
	keyed.TrackingHash, keyed.TrackingKeyFile, keyed.TrackingKeyID = TrackingKeyed, "/key", "k1"
	for _, cfg := range []Config{DefaultConfig(), keyed} {
		mk := func() *Engine {
			e, err := New(cfg, Options{TrackingKey: []byte(strings.Repeat("\x5a", 32)), Rand: rand.New(rand.NewPCG(1, 1))})
			noErr(t, err)
			for i := uint64(1); i <= 4; i++ {
				mustUpsert(t, e, spec(i))
			}
			return e
		}
		inline, pre := mk(), mk()
		rng := rand.New(rand.NewPCG(9, 9))
		for i := range 60 {
			req := func() *SelectRequest {
				r := selReq(fmt.Sprintf("r%d", i), toks(rng.IntN(50), 4+rng.IntN(200)))
				if i%3 == 0 {
					r.LoraName, r.CacheSalt = ptr("lora-a"), ptr("salt-b")
				}
				if i%5 == 0 {
					r.IsEagle = ptr(true)
				}
				if i%7 == 0 {
					r.RouterConfigOverride = &ConfigOverride{AssumeKVReuse: ptr(false)}
				}
				if i%4 == 1 {
					n := 3 + rng.IntN(40)
					h := make([]int64, n)
					for j := range h {
						h[j] = rng.Int64()
					}
					r.TokenIDs, r.BlockHashes, r.SequenceHashes, r.ISLTokens = nil, h, slices.Clone(h), ptr(uint64(n*4))
				}
				return r
			}
			a := req()
			b := new(SelectRequest)
			*b = *a // the prompt's slices are only read
			pre.Prehash(pre.HashPlan(defKey), &b.Prompt, b.RouterConfigOverride)
			if b.Prompt.pre == nil {
				t.Fatalf("request %d: not prehashed", i)
			}
			ra, errA := inline.SelectAndReserve(a, t0)
			rb, errB := pre.SelectAndReserve(b, t0)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("request %d: inline err %v, prehashed err %v", i, errA, errB)
			}
			if errA != nil {
				continue
			}
			if ra.WorkerID != rb.WorkerID || !slices.Equal(ra.Booked.SequenceHashes, rb.Booked.SequenceHashes) || ra.Overlap.LongestMatched != rb.Overlap.LongestMatched {
				t.Fatalf("request %d: inline %+v, prehashed %+v", i, ra, rb)
			}
			if b.Prompt.pre != nil {
				t.Fatalf("request %d: prehashed form not consumed", i)
			}
		}
	}
	// A plan for block size 4 is ignored once the partition's only worker moved it to 8.
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	r := selReq("x", toks(0, 2048))
	e.Prehash(e.HashPlan(defKey), &r.Prompt, nil)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.BlockSize = ptr(uint32(8)) }))
	resp, err := e.SelectAndReserve(r, t0)
	noErr(t, err)
	if len(resp.Booked.SequenceHashes) != 2048/8 {
		t.Fatalf("stale plan used: %d hashes booked, want %d", len(resp.Booked.SequenceHashes), 2048/8)
	}
}

// TestRequestSizeLimits: prompts over the token or hash limit are refused with ErrTooLarge
// naming the limit and its flag, change nothing, and are counted.
func TestRequestSizeLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Limits.MaxRequestTokens, cfg.Limits.MaxRequestHashes = 100, 10
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	_, err := e.SelectAndReserve(selReq("a", toks(0, 101)), t0)
	wantErr(t, err, ErrTooLarge, "101 tokens", "limit is 100", "--max-request-tokens")
	_, err = e.SelectAndReserve(selReq("b", toks(0, 44)), t0) // 11 blocks at block size 4
	wantErr(t, err, ErrTooLarge, "11 blocks", "limit is 10", "--max-request-hashes")
	h := make([]int64, 11)
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("c"), WorkerID: ptr(uint64(1)), Prompt: Prompt{SequenceHashes: h, ISLTokens: ptr(uint64(44))}}, t0)
	wantErr(t, err, ErrTooLarge, "11 entries", "limit is 10")
	if st := e.LimitStats(); st.Bookings != 0 || st.Counters.RejectedTooLarge != 3 {
		t.Fatalf("stats %+v: want no bookings and 3 refusals", st)
	}
	_, err = e.SelectAndReserve(selReq("d", toks(0, 40)), t0)
	noErr(t, err)
	// Negative disables the limit.
	cfg.Limits.MaxRequestTokens, cfg.Limits.MaxRequestHashes = -1, -1
	e = newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	_, err = e.SelectAndReserve(selReq("e", toks(0, 5000)), t0)
	noErr(t, err)
}
