package core

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/recovery"
)

// dumpServer serves body (or svc's live dump when body is nil) at /dump.
func dumpServer(t testing.TB, svc *Service, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/dump" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if body != nil {
			_, _ = w.Write(body)
			return
		}
		_ = svc.Dump(w)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRecoveryRoundTrip is the round-trip property: for random indexes, dump → recover over
// HTTP into an empty service (no workers yet: the index waits) → dump again gives the same
// index (compared as facts, not bytes), and once the same workers register, /overlap_scores
// answers every prompt exactly like the source.
func TestRecoveryRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		sh := indexShape{workers: 1 + rng.IntN(4), chains: 1 + rng.IntN(6), prefixBlocks: rng.IntN(4), tailBlocks: 1 + rng.IntN(5), bases: 1 + rng.IntN(3)}
		src := newKVService(t, seed)
		register(t, src, "m", sh.workers)
		if _, err := src.UpsertWorker(kvWorker(99, "other", 4, 1)); err != nil { // a second, empty partition
			t.Fatal(err)
		}
		seedIndex(t, src, sh, rng)
		want := dumpBytes(t, src)

		dst := newKVService(t, seed+100)
		st := dst.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{dumpServer(t, src, nil).URL}})
		if st.Source != "http" || st.State != "done" || st.Error != "" || st.Bytes != int64(len(want)) {
			t.Fatalf("seed %d: status %+v", seed, st)
		}
		if got, w := semantic(t, dumpBytes(t, dst)), semantic(t, want); !reflect.DeepEqual(got, w) {
			t.Fatalf("seed %d: recovered dump differs: %d facts vs %d", seed, len(got), len(w))
		}
		register(t, dst, "m", sh.workers)
		var prompts [][]uint32
		for w := 1; w <= sh.workers; w++ {
			for c := 0; c < sh.chains; c++ {
				p := sh.prompt(uint64(w), uint32(c%2), c)
				prompts = append(prompts, p, p[:len(p)/2], append(append([]uint32{}, p...), 1, 2, 3, 4, 5))
			}
		}
		if got, w := overlaps(t, dst, "m", prompts), overlaps(t, src, "m", prompts); !reflect.DeepEqual(got, w) {
			for i := range got {
				if !reflect.DeepEqual(got[i], w[i]) {
					t.Fatalf("seed %d: overlap scores differ after recovery, prompt %d:\n got %+v\nwant %+v", seed, i, *got[i], *w[i])
				}
			}
		}
		if got, w := semantic(t, dumpBytes(t, dst)), semantic(t, want); !reflect.DeepEqual(got, w) {
			t.Fatalf("seed %d: adopted index differs from the source", seed)
		}
	}
}

// TestRecoveryDynamoFixture recovers the hand-written Dynamo dump and checks what the
// selector then sees for the golden prompt tokens 0..15 (spec golden-hashes.md).
func TestRecoveryDynamoFixture(t *testing.T) {
	raw, err := os.ReadFile("../recovery/testdata/dynamo_dump.json")
	if err != nil {
		t.Fatal(err)
	}
	svc := newKVService(t, 5)
	for id := uint64(1); id <= 5; id++ {
		if _, err := svc.UpsertWorker(kvWorker(id, "llama", 4, 2)); err != nil {
			t.Fatal(err)
		}
	}
	st := svc.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{dumpServer(t, nil, raw).URL}})
	if st.Source != "http" || st.Partitions != 2 || st.Blocks != 12 || st.Rejected != 0 {
		t.Fatalf("status %+v", st)
	}
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(i)
	}
	res := overlaps(t, svc, "llama", [][]uint32{toks})[0]
	type row struct{ dev, host uint64 }
	got := map[[2]uint64]row{}
	for _, r := range res.Workers {
		got[[2]uint64{r.WorkerID, uint64(r.DPRank)}] = row{r.DeviceBlocks, r.HostPinnedBlocks}
	}
	want := map[[2]uint64]row{
		{1, 0}: {4, 4}, // one 4-block stored event
		{2, 1}: {2, 3}, // two device blocks by parent chain, a third in host_pinned
		{3, 0}: {1, 1}, // second block removed
		{4, 0}: {0, 0}, // stored in disk, then cleared
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("worker %d rank %d: device/host %+v, want %+v", k[0], k[1], got[k], w)
		}
	}
	// The routing group with ':' waits for its partition.
	recs := semantic(t, dumpBytes(t, svc))
	found := false
	for _, r := range recs {
		if r.part == (recovery.Partition{Model: "mistral", Group: "tenant:a"}) && r.worker == 7 && r.rank == 3 && r.loc == 1948362209192800259 {
			found = true
		}
	}
	if !found {
		t.Fatal("mistral:tenant:a partition not recovered")
	}
}

// TestRecoveryRejectsBadDumps: hostile dumps change nothing (or only what the good partitions
// say), never panic, and recovery still completes ("done", started empty).
func TestRecoveryRejectsBadDumps(t *testing.T) {
	src := newKVService(t, 1)
	register(t, src, "m", 2)
	seedIndex(t, src, indexShape{workers: 2, chains: 3, prefixBlocks: 2, tailBlocks: 3, bases: 2}, rand.New(rand.NewPCG(1, 2)))
	good := dumpBytes(t, src)
	bs16 := bytes.Replace(good, []byte(`"block_size":4`), []byte(`"block_size":16`), 1)
	tests := []struct {
		name      string
		body      string
		lim       recovery.Limits
		wantFacts int // facts in the recovering service's dump afterwards
	}{
		{"truncated", string(good[:len(good)*2/3]), recovery.Limits{}, 0},
		{"corrupted", strings.Replace(string(good), `"tokens_hash"`, `"tokens_hash`, 1), recovery.Limits{}, 0},
		{"oversized", string(good), recovery.Limits{MaxBytes: 1000}, 0},
		{"too many events", string(good), recovery.Limits{MaxEvents: 5}, 0},
		{"deep nesting", `{"m:default":{"block_size":4,"events":[` + strings.Repeat("[", 50000) + `]}}`, recovery.Limits{}, 0},
		{"huge array", `{"m:default":{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":{"removed":{"block_hashes":[` + strings.Repeat("1,", 200000) + `1]}},"dp_rank":0}}]}}`, recovery.Limits{}, 0},
		{"wrong types", `{"m:default":{"block_size":"4","events":[]},"x:y":{"block_size":4,"events":[{"worker_id":-1}]}}`, recovery.Limits{}, 0},
		{"key without colon", strings.Replace(string(good), `"m:default"`, `"m-default"`, 1), recovery.Limits{}, 0},
		{"block size mismatch vs registered partition", string(bs16), recovery.Limits{}, 0},
		{"not json", "<html>502</html>", recovery.Limits{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := newKVService(t, 2)
			register(t, dst, "m", 2)
			st := dst.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{dumpServer(t, nil, []byte(tc.body)).URL}, Limits: tc.lim})
			if st.State != "done" {
				t.Fatalf("status %+v", st)
			}
			if n := len(semantic(t, dumpBytes(t, dst))); n != tc.wantFacts {
				t.Fatalf("%d facts installed, want %d (status %+v)", n, tc.wantFacts, st)
			}
		})
	}
}

// TestRecoveryFirstGoodPeerWins: a failing peer is skipped with nothing of it kept, and the
// next peer's dump is installed whole.
func TestRecoveryFirstGoodPeerWins(t *testing.T) {
	src := newKVService(t, 1)
	register(t, src, "m", 2)
	seedIndex(t, src, indexShape{workers: 2, chains: 2, prefixBlocks: 1, tailBlocks: 2, bases: 1}, rand.New(rand.NewPCG(4, 4)))
	good := dumpBytes(t, src)
	half := good[:len(good)-2] // every partition complete but the document is not
	dst := newKVService(t, 2)
	st := dst.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{
		dumpServer(t, nil, half).URL, dumpServer(t, nil, good).URL,
	}})
	if st.Source != "http" || !strings.HasSuffix(st.Peer, "") || st.Bytes != int64(len(good)) {
		t.Fatalf("status %+v", st)
	}
	if got, want := semantic(t, dumpBytes(t, dst)), semantic(t, good); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %d facts, want %d (the failed peer's partitions must be discarded)", len(got), len(want))
	}
}

// TestReadyGatedByRecovery: /ready stays not-ready from expectRecovery (New with
// Recovery.Enabled) until Recover has
// submitted, and reports the recovery object; without recovery the object is absent.
func TestReadyGatedByRecovery(t *testing.T) {
	svc := newKVService(t, 3)
	register(t, svc, "m", 1)
	if r := svc.Ready(); !r.Ready || r.Recovery != nil {
		t.Fatalf("no recovery expected: %+v", r)
	}
	svc.expectRecovery()
	if r := svc.Ready(); r.Ready || r.Recovery == nil || r.Recovery.State != "pending" {
		t.Fatalf("pending recovery: ready=%v recovery=%+v", r.Ready, r.Recovery)
	}
	start := time.Now()
	st := svc.Recover(context.Background(), RecoveryConfig{HTTPPeers: []string{"http://127.0.0.1:1"}, HTTPTimeout: time.Second, NATS: NATSRecoveryAuto})
	if st.Source != "none" || st.Error == "" || time.Since(start) > 5*time.Second {
		t.Fatalf("status %+v", st)
	}
	r := svc.Ready()
	if !r.Ready || r.Recovery == nil || r.Recovery.State != "done" || r.Recovery.Source != "none" {
		t.Fatalf("after recovery: ready=%v recovery=%+v", r.Ready, r.Recovery)
	}
}

// TestRecoveryModes pins the --nats-recovery modes Config.Validate accepts ("" is auto in New).
func TestRecoveryModes(t *testing.T) {
	for _, m := range []NATSRecoveryMode{"", "auto", "off", "force", "always"} {
		c := Config{Engine: engine.DefaultConfig(), Recovery: RecoveryConfig{NATS: m}}.withDefaults()
		err := c.Validate()
		if want := m == "always"; (err != nil) != want {
			t.Errorf("%q: %v", m, err)
		}
		if m == "always" && err.Error() != `--nats-recovery: core: --nats-recovery must be auto, off or force: "always"` {
			t.Errorf("message %q", err)
		}
	}
	if m := (Config{}).withDefaults().Recovery.NATS; m != NATSRecoveryAuto {
		t.Errorf("default mode %q", m)
	}
}
