package kvlisten

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/internal/pyzmqtest"
)

// pythonWithZMQ returns an interpreter that imports zmq and msgpack (see pyzmqtest.Python).
func pythonWithZMQ(t *testing.T) string { return pyzmqtest.Python(t) }

// pyPub drives testdata/vllm_publisher.py over its stdin/stdout protocol.
type pyPub struct {
	t               *testing.T
	proc            *pyzmqtest.Process
	pubEP, replayEP string
}

// startPyPub launches the script; pub/replay may name fixed endpoints (to
// restart at the same address) or use port 0.
func startPyPub(t *testing.T, py string, args ...string) *pyPub {
	t.Helper()
	proc := pyzmqtest.Start(t, py, "testdata/vllm_publisher.py", 10*time.Second, args...)
	return &pyPub{t: t, proc: proc, pubEP: proc.PubEP, replayEP: proc.ReplayEP}
}

// do sends one formatted command and returns the text after "OK".
func (p *pyPub) do(format string, a ...any) string {
	p.t.Helper()
	return p.proc.Do(fmt.Sprintf(format, a...))
}

// stop ends the script and reaps it.
func (p *pyPub) stop() { p.proc.Stop() }

// warmUp publishes single batches until the listener has applied one, which
// proves the SUB is connected and subscribed (libzmq PUB drops until then);
// anything dropped meanwhile is repaired from the replay buffer.
func warmUp(t *testing.T, p *pyPub, h *recHandler, prefix string) {
	t.Helper()
	start := h.count()
	err := poll.Poll(poll.Generous, 20*time.Millisecond, func() error {
		if h.count() != start {
			return nil
		}
		p.do("tick 1 %s", prefix)
		return errors.New("listener never received from the python publisher")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkContiguous asserts recs carry seqs from..from+len-1 with payloads
// prefix<seq>.
func checkContiguous(t *testing.T, recs []record, from uint64, prefix string) {
	t.Helper()
	for i, r := range recs {
		want := from + uint64(i)
		if r.seq != want || r.payload != fmt.Sprintf("%s%d", prefix, want) {
			t.Fatalf("record %d = %+v, want seq %d payload %s%d", i, r, want, prefix, want)
		}
	}
}

// TestPythonInteropGapRepair runs the libzmq publisher: slow-joiner loss and a dropped
// range are repaired through libzmq's ROUTER in both reply shapes.
func TestPythonInteropGapRepair(t *testing.T) {
	py := pythonWithZMQ(t)
	for _, shape := range []string{"vllm", "sglang"} {
		t.Run(shape, func(t *testing.T) {
			p := startPyPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0", "--replay-shape", shape)
			h := &recHandler{}
			l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h, Topic: "kv"})
			warmUp(t, p, h, "p")
			p.do("tick 5")
			p.do("drop 7")
			last := p.do("tick 5")
			poll.True(t, wait, "all batches", func() bool { return l.State().Watermark == mustUint(t, last) })
			got, restarts, _ := h.snapshot()
			checkContiguous(t, got, 0, "p")
			if len(restarts) != 0 {
				t.Fatalf("restarts %v", restarts)
			}
			replayed := 0
			for _, r := range got {
				if r.replayed {
					replayed++
				}
			}
			if st := l.State(); replayed < 7 || st.Lost != 0 || st.ReplayFails != 0 || st.Batches != uint64(len(got)) {
				t.Fatalf("replayed %d, state %+v", replayed, st)
			}
		})
	}
}

// TestPythonInteropProcessRestart kills the engine process and starts a new one on the same
// ports: one Restarted call with the old watermark, then seq 0.. of the new
// incarnation, early batches via replay.
func TestPythonInteropProcessRestart(t *testing.T) {
	py := pythonWithZMQ(t)
	p := startPyPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
	warmUp(t, p, h, "a")
	last := mustUint(t, p.do("tick 20 a"))
	poll.True(t, wait, "first incarnation", func() bool { return l.State().Watermark == last })
	p.stop() // the engine process dies
	poll.True(t, wait, "failed", func() bool { return l.State().Status == StatusFailed })

	q := startPyPub(t, py, "--pub", p.pubEP, "--replay", p.replayEP) // same addresses, seq from 0
	warmUp(t, q, h, "b")
	lastB := mustUint(t, q.do("tick 3 b"))
	poll.True(t, wait, "second incarnation", func() bool {
		st := l.State()
		return st.Restarts == 1 && st.HasWatermark && st.Watermark == lastB
	})
	got, restarts, order := h.snapshot()
	if len(restarts) != 1 || restarts[0][0] != last {
		t.Fatalf("restarts = %v, want prev watermark %d", restarts, last)
	}
	split := int(last) + 1
	checkContiguous(t, got[:split], 0, "a")
	checkContiguous(t, got[split:], 0, "b") // early b batches came from replay
	if order[split] != fmt.Sprintf("restart:%d:%d", restarts[0][0], restarts[0][1]) {
		t.Fatalf("Restarted not before the first new batch: %v", order[split-1:split+2])
	}
}

// TestPythonInteropInProcessRestartAndLoss covers failed sends (lost seqs, no replay) and
// the script's in-process restart.
func TestPythonInteropInProcessRestartAndLoss(t *testing.T) {
	py := pythonWithZMQ(t)
	p := startPyPub(t, py, "--pub", "tcp://127.0.0.1:0") // no replay endpoint
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, Handler: h})
	warmUp(t, p, h, "a")
	p.do("tick 10 a")
	p.do("lose 2")
	last := mustUint(t, p.do("tick 1 a"))
	poll.True(t, wait, "loss seen", func() bool { return l.State().Watermark == last })
	if st := l.State(); st.Lost < 2 {
		t.Fatalf("state %+v", st)
	}
	p.do("restart")
	warmUp(t, p, h, "b")
	poll.True(t, wait, "restart", func() bool { return l.State().Restarts == 1 })
	if _, restarts, _ := h.snapshot(); restarts[0][0] != last {
		t.Fatalf("restarts = %v", restarts)
	}
}

// Golden payloads from kv-events-wire-format.md §1.11.
const (
	goldenMapBatch = "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573" +
		"91cfdab89baa7b5857c0b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473" +
		"94ce0002505ccd0368ccc6cd2368aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055" +
		"a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647800" +
		"b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00"
	goldenArrayBatch = "93cb41d954fc402000009197ab426c6f636b53746f72656491cfdab89baa7b5857c0c0" +
		"94ce0002505ccd0368ccc6cd236804c0a347505500"
	goldenStored = `{"type":"BlockStored","block_hashes":[15760518052499183552],"parent_block_hash":null,` +
		`"token_ids":[151644,872,198,9064],"block_size":4,"medium":"GPU","extra_keys":[null],` +
		`"group_idx":0,"kv_cache_spec_kind":"full_attention"}`
)

// TestPythonPublisherEmitsVLLMBytes checks the script against the reference golden bytes
// and that payloads cross libzmq → go-zeromq unchanged.
func TestPythonPublisherEmitsVLLMBytes(t *testing.T) {
	py := pythonWithZMQ(t)
	p := startPyPub(t, py, "--pub", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0")
	h := &recHandler{}
	l := startListener(t, Config{Endpoint: p.pubEP, ReplayEndpoint: p.replayEP, Handler: h})
	warmUp(t, p, h, "w")
	cases := []struct{ name, spec, want string }{
		{"map_events", `{"ts":1700000000.5,"events":[` + goldenStored + `]}`, goldenMapBatch},
		{"array_events_7", `{"ts":1700000000.5,"format":"array","stored_len":7,"events":[` + goldenStored + `]}`, goldenArrayBatch},
		{"map_removed", `{"ts":1.5,"events":[{"type":"BlockRemoved","block_hashes":[15760518052499183552]}]}`,
			"93cb3ff800000000000091" + "83a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cfdab89baa7b5857c0a66d656469756da3475055" + "00"},
		{"array_removed_3_cleared", `{"ts":1.5,"format":"array","removed_len":3,"events":[{"type":"BlockRemoved","block_hashes":[15760518052499183552]},{"type":"AllBlocksCleared"}]}`,
			"93cb3ff800000000000092" + "93ac426c6f636b52656d6f76656491cfdab89baa7b5857c0a3475055" + "91b0416c6c426c6f636b73436c6561726564" + "00"},
		{"map_cleared", `{"ts":1.5,"dp_rank":null,"events":[{"type":"AllBlocksCleared"}]}`,
			"93cb3ff800000000000091" + "81a474797065b0416c6c426c6f636b73436c6561726564" + "c0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := strings.Fields(p.do("batch %s", tc.spec))
			if len(f) != 2 {
				t.Fatalf("reply %v", f)
			}
			if f[1] != tc.want {
				t.Fatalf("encoded\n got %s\nwant %s", f[1], tc.want)
			}
			seq := mustUint(t, f[0])
			poll.True(t, wait, "batch", func() bool { return l.State().Watermark == seq })
			got, _, _ := h.snapshot()
			if hex.EncodeToString([]byte(got[len(got)-1].payload)) != tc.want {
				t.Fatalf("payload changed in transit: %x", got[len(got)-1].payload)
			}
		})
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	var v uint64
	if _, err := fmt.Sscan(strings.Fields(s)[0], &v); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}
