package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestParseDynamoFixture parses a dump written by hand in Dynamo's exact format (spec §11.2):
// multi-block and single-block stored events, a parent chain, tiers (absent = device), removed,
// the "cleared" unit variant, mm_extra_info, start_position, optional top-level members, block_size
// after events, a routing group containing ':' and a per-partition {"error": ...} value.
func TestParseDynamoFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/dynamo_dump.json")
	if err != nil {
		t.Fatal(err)
	}
	s := newRecSink(t)
	st, err := ParseDump(bytes.NewReader(raw), s, Limits{})
	if err != nil {
		t.Fatalf("ParseDump: %v", err)
	}
	want := Stats{Bytes: int64(len(raw)), Partitions: 2, Rejected: 0, Errored: 1, Events: 10, Blocks: 12}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if len(s.done) != 2 || s.done[0].P != (Partition{"llama", "default"}) || s.done[1].P != (Partition{"mistral", "tenant:a"}) {
		t.Fatalf("partitions %+v", s.done)
	}
	if s.done[0].BS != 4 || s.done[1].BS != 4 {
		t.Fatalf("block sizes %d %d", s.done[0].BS, s.done[1].BS)
	}
	ev := s.done[0].Events
	checks := []struct {
		i    int
		want RouterEvent
	}{
		{0, RouterEvent{WorkerID: 1, EventID: 0, Kind: EventStored, Blocks: []Block{
			{9143094415614847814, 9143094415614847814}, {9510318385840434533, 12124091508212882195},
			{16998148715716822651, 1088361764653601668}, {16790386768269814709, 16024980976528976948}}}},
		{1, RouterEvent{WorkerID: 2, DPRank: 1, EventID: 1, Kind: EventStored, Blocks: []Block{{101, 9143094415614847814}}}},
		{2, RouterEvent{WorkerID: 2, DPRank: 1, EventID: 2, Kind: EventStored, Parent: 101, HasParent: true, Blocks: []Block{{102, 12124091508212882195}}}},
		{3, RouterEvent{WorkerID: 2, DPRank: 1, Tier: kvwire.TierHostPinned, EventID: 3, Kind: EventStored, Parent: 102, HasParent: true, Blocks: []Block{{103, 1088361764653601668}}}},
		{4, RouterEvent{WorkerID: 3, EventID: 4, Kind: EventStored, Blocks: []Block{{201, 9143094415614847814}, {202, 12124091508212882195}}}},
		{5, RouterEvent{WorkerID: 3, EventID: 5, Kind: EventRemoved, Blocks: []Block{}, Removed: []uint64{202}}},
		{6, RouterEvent{WorkerID: 4, Tier: kvwire.TierDisk, EventID: 6, Kind: EventStored, Blocks: []Block{{301, 9143094415614847814}}}},
		{7, RouterEvent{WorkerID: 4, EventID: 7, Kind: EventCleared, Blocks: []Block{}}},
		{8, RouterEvent{WorkerID: 5, Tier: kvwire.TierExternal, EventID: 8, Kind: EventStored, Blocks: []Block{{401, 9143094415614847814}}}},
	}
	if len(ev) != len(checks) {
		t.Fatalf("%d events, want %d", len(ev), len(checks))
	}
	for _, c := range checks {
		got := ev[c.i]
		if got.Removed == nil {
			got.Removed = nil
		}
		if len(got.Removed) == 0 {
			got.Removed = c.want.Removed[:0:0]
			if c.want.Removed == nil {
				got.Removed = nil
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("event %d:\n got %+v\nwant %+v", c.i, got, c.want)
		}
	}
	if got := s.done[1].Events[0]; got.DPRank != 3 || got.WorkerID != 7 || got.Blocks[0] != (Block{9001, 1948362209192800259}) {
		t.Errorf("mistral event %+v", got)
	}
}

// TestParseVariations covers accepted document shapes.
func TestParseVariations(t *testing.T) {
	const ev = `{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":5,"tokens_hash":6}]}},"dp_rank":0}}`
	tests := []struct {
		name       string
		doc        string
		partitions int
		events     int
		errored    int
	}{
		{"empty document", `{}`, 0, 0, 0},
		{"whitespace around", " \n{ } \n", 0, 0, 0},
		{"block_size first", `{"m:g":{"block_size":16,"events":[` + ev + `]}}`, 1, 1, 0},
		{"block_size last", `{"m:g":{"events":[` + ev + `],"block_size":16}}`, 1, 1, 0},
		{"empty events", `{"m:g":{"block_size":16,"events":[]}}`, 1, 0, 0},
		{"null events", `{"m:g":{"block_size":16,"events":null}}`, 1, 0, 0},
		{"no events member", `{"m:g":{"block_size":16}}`, 0, 0, 0},
		{"unknown members everywhere", `{"m:g":{"x":{"deep":[1,2,{"a":null}]},"block_size":16,"events":[` +
			`{"future":[1],"worker_id":1,"event":{"z":"q","event_id":0,"data":{"stored":{"w":1,"parent_hash":null,"blocks":[{"block_hash":5,"tokens_hash":6,"extra":{"k":[]}}]}},"dp_rank":0}}` +
			`],"y":"s"}}`, 1, 1, 0},
		{"error partition", `{"m:g":{"error":"boom"},"n:g":{"block_size":4,"events":[` + ev + `]}}`, 1, 1, 1},
		{"error after events", `{"m:g":{"block_size":4,"events":[` + ev + `],"error":"late"}}`, 0, 0, 1},
		{"group with colons", `{"m:a:b:c":{"block_size":16,"events":[` + ev + `]}}`, 1, 1, 0},
		{"empty model and group", `{":":{"block_size":16,"events":[` + ev + `]}}`, 1, 1, 0},
		{"escaped key", `{"m\u003ag":{"block_size":16,"events":[` + ev + `]}}`, 1, 1, 0},
		{"cleared as map", `{"m:g":{"block_size":16,"events":[{"worker_id":1,"event":{"event_id":0,"data":{"cleared":null},"dp_rank":0}}]}}`, 1, 1, 0},
		{"null tier and rank", `{"m:g":{"block_size":16,"events":[{"worker_id":1,"storage_tier":null,"event":{"event_id":0,"data":"cleared","dp_rank":null}}]}}`, 1, 1, 0},
		{"max u64 hash", `{"m:g":{"block_size":16,"events":[{"worker_id":18446744073709551615,"event":{"event_id":0,"data":{"stored":{"parent_hash":18446744073709551615,"blocks":[{"block_hash":18446744073709551614,"tokens_hash":0}]}},"dp_rank":4294967295}}]}}`, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRecSink(t)
			st, err := ParseDump(strings.NewReader(tc.doc), s, Limits{})
			if err != nil {
				t.Fatalf("ParseDump: %v", err)
			}
			if st.Partitions != tc.partitions || st.Events != tc.events || st.Errored != tc.errored || st.Rejected != 0 {
				t.Fatalf("stats %+v, want partitions=%d events=%d errored=%d", st, tc.partitions, tc.events, tc.errored)
			}
			if len(s.done) != tc.partitions || s.cur != nil {
				t.Fatalf("sink has %d partitions (open=%v)", len(s.done), s.cur != nil)
			}
		})
	}
	s := newRecSink(t)
	if _, err := ParseDump(strings.NewReader(`{"m:a:b:c":{"block_size":16,"events":[]},"x\u003ay:z":{"block_size":1,"events":[]}}`), s, Limits{}); err != nil {
		t.Fatal(err)
	}
	if s.done[0].P != (Partition{"m", "a:b:c"}) || s.done[1].P != (Partition{"x", "y:z"}) {
		t.Fatalf("keys split wrongly: %+v", s.done)
	}
}

// TestParseRejectsPartitionOnly checks that a malformed partition the stream can step over is
// rejected alone: the good partition after it still completes, and the bad one reaches the
// sink never or ends in Abort (never in End).
func TestParseRejectsPartitionOnly(t *testing.T) {
	stored := func(body string) string {
		return `{"worker_id":1,"event":{"event_id":0,"data":{"stored":` + body + `},"dp_rank":0}}`
	}
	okEv := stored(`{"parent_hash":null,"blocks":[{"block_hash":1,"tokens_hash":2}]}`)
	tests := []struct{ name, value string }{
		{"key without colon", ``}, // replaced below
		{"value not an object", `[1,2,[3]]`},
		{"value a string", `"nope"`},
		{"block_size string", `{"block_size":"16","events":[` + okEv + `]}`},
		{"block_size negative", `{"block_size":-1,"events":[` + okEv + `]}`},
		{"block_size fraction", `{"block_size":1.5,"events":[` + okEv + `]}`},
		{"block_size over u32", `{"block_size":4294967296,"events":[` + okEv + `]}`},
		{"block_size zero", `{"block_size":0,"events":[` + okEv + `]}`},
		{"block_size missing", `{"events":[` + okEv + `]}`},
		{"events an object", `{"block_size":4,"events":{"a":1}}`},
		{"event a string", `{"block_size":4,"events":["x"]}`},
		{"event an array", `{"block_size":4,"events":[[` + okEv + `]]}`},
		{"worker_id string", `{"block_size":4,"events":[{"worker_id":"1","event":{"event_id":0,"data":"cleared","dp_rank":0}}]}`},
		{"worker_id missing", `{"block_size":4,"events":[{"event":{"event_id":0,"data":"cleared","dp_rank":0}}]}`},
		{"event missing", `{"block_size":4,"events":[{"worker_id":1}]}`},
		{"data missing", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"dp_rank":0}}]}`},
		{"unknown tier", `{"block_size":4,"events":[{"worker_id":1,"storage_tier":"gpu","event":{"event_id":0,"data":"cleared","dp_rank":0}}]}`},
		{"unknown unit variant", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":"flushed","dp_rank":0}}]}`},
		{"unknown variant", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":{"moved":{}},"dp_rank":0}}]}`},
		{"two variants", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":{"removed":{"block_hashes":[]},"stored":{"blocks":[]}},"dp_rank":0}}]}`},
		{"hash negative", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[{"block_hash":-1,"tokens_hash":2}]}`) + `]}`},
		{"hash fraction", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[{"block_hash":1.0,"tokens_hash":2}]}`) + `]}`},
		{"hash exponent", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[{"block_hash":1e3,"tokens_hash":2}]}`) + `]}`},
		{"hash overflow", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[{"block_hash":18446744073709551616,"tokens_hash":2}]}`) + `]}`},
		{"hash string", `{"block_size":4,"events":[` + stored(`{"parent_hash":"1","blocks":[{"block_hash":1,"tokens_hash":2}]}`) + `]}`},
		{"block missing tokens_hash", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[{"block_hash":1}]}`) + `]}`},
		{"blocks an object", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":{"block_hash":1}}`) + `]}`},
		{"dp_rank over u32", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":"cleared","dp_rank":4294967296}}]}`},
		{"too many blocks", `{"block_size":4,"events":[` + stored(`{"parent_hash":null,"blocks":[`+strings.Repeat(`{"block_hash":1,"tokens_hash":2},`, 8)+`{"block_hash":1,"tokens_hash":2}]}`) + `]}`},
		{"too many removed", `{"block_size":4,"events":[{"worker_id":1,"event":{"event_id":0,"data":{"removed":{"block_hashes":[1,2,3,4,5,6,7,8,9,10]}},"dp_rank":0}}]}`},
		{"bad after good events", `{"block_size":4,"events":[` + okEv + `,` + okEv + `,"bad",` + okEv + `]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, value := `"bad:g"`, tc.value
			if tc.name == "key without colon" {
				key, value = `"badkey"`, `{"block_size":4,"events":[`+okEv+`]}`
			}
			doc := `{` + key + `:` + value + `,"good:g":{"block_size":4,"events":[` + okEv + `]}}`
			s := newRecSink(t)
			st, err := ParseDump(strings.NewReader(doc), s, Limits{MaxBlocksPerEvent: 8})
			if err != nil {
				t.Fatalf("ParseDump: %v", err)
			}
			if st.Rejected != 1 || st.Partitions != 1 || len(s.done) != 1 || s.done[0].P.Model != "good" {
				t.Fatalf("stats %+v, done %+v", st, s.done)
			}
			for _, a := range s.aborts {
				if !errors.Is(a, ErrPartition) {
					t.Errorf("abort error %v does not wrap ErrPartition", a)
				}
			}
		})
	}
}

// TestParseSinkErrors: a Begin or Event error rejects that partition only.
func TestParseSinkErrors(t *testing.T) {
	doc := genDump(3, 2, 3)
	boom := errors.New("boom")
	s := newRecSink(t)
	s.failBegin = func(p Partition) error {
		if p.Model == "model-1" {
			return boom
		}
		return nil
	}
	st, err := ParseDump(bytes.NewReader(doc), s, Limits{})
	if err != nil || st.Partitions != 2 || st.Rejected != 1 || len(s.aborts) != 0 {
		t.Fatalf("begin error: %+v %v aborts=%d", st, err, len(s.aborts))
	}
	s = newRecSink(t)
	s.failEvent = func(ev *RouterEvent) error {
		if ev.WorkerID == 1 && ev.EventID == 4 {
			return boom
		}
		return nil
	}
	st, err = ParseDump(bytes.NewReader(doc), s, Limits{})
	if err != nil || st.Partitions != 0 || st.Rejected != 3 || len(s.aborts) != 3 || !errors.Is(s.aborts[0], boom) {
		t.Fatalf("event error: %+v %v aborts=%v", st, err, s.aborts)
	}
}

// TestParseFatal: stream-breaking input fails the whole document with the right sentinel, and
// the sink is never left with an open partition.
func TestParseFatal(t *testing.T) {
	good := string(genDump(2, 2, 2))
	tests := []struct {
		name string
		doc  string
		lim  Limits
		want error
	}{
		{"empty input", ``, Limits{}, ErrMalformed},
		{"top-level array", `[]`, Limits{}, ErrMalformed},
		{"top-level null", `null`, Limits{}, ErrMalformed},
		{"trailing data", `{} {}`, Limits{}, ErrMalformed},
		{"trailing garbage", `{}x`, Limits{}, ErrMalformed},
		{"syntax error in event", `{"m:g":{"block_size":4,"events":[{"worker_id":1,,}]}}`, Limits{}, ErrMalformed},
		{"unterminated string", `{"m:g":{"block_size":4,"events":[{"worker_id":"x`, Limits{}, ErrMalformed},
		{"missing colon", `{"m:g" {"block_size":4}}`, Limits{}, ErrMalformed},
		{"corrupted middle", good[:len(good)/2] + "\x00" + good[len(good)/2+1:], Limits{}, ErrMalformed},
		{"byte limit", good, Limits{MaxBytes: int64(len(good) - 1)}, ErrTooLarge},
		{"event limit", good, Limits{MaxEvents: 3}, ErrTooLarge},
		{"partition limit", good, Limits{MaxPartitions: 1}, ErrTooLarge},
		{"one huge event", `{"m:g":{"block_size":4,"events":[{"worker_id":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}]}}`, Limits{MaxEventBytes: 64 << 10}, ErrTooLarge},
		{"deep nesting in event", `{"m:g":{"block_size":4,"events":[` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]}}`, Limits{}, ErrMalformed},
		{"deep nesting in unknown member", `{"m:g":{"x":` + strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat("}", 20000) + `}}`, Limits{}, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRecSink(t)
			_, err := ParseDump(strings.NewReader(tc.doc), s, tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if s.cur != nil {
				t.Fatalf("partition %v left open", s.cur.P)
			}
		})
	}
}

// TestParseEveryTruncation: every strict prefix of a valid dump fails (no prefix is mistaken
// for a complete document), and no partition stays open.
func TestParseEveryTruncation(t *testing.T) {
	raw, err := os.ReadFile("testdata/dynamo_dump.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.TrimSpace(raw)
	for n := 0; n < len(raw); n++ {
		s := newRecSink(t)
		if _, err := ParseDump(bytes.NewReader(raw[:n]), s, Limits{}); !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d/%d bytes: err %v, want ErrMalformed", n, len(raw), err)
		}
		if s.cur != nil {
			t.Fatalf("prefix of %d bytes left partition %v open", n, s.cur.P)
		}
	}
}

// TestParseMatchesGenerator is a property test: random dumps (random member order, tiers,
// variants, optional members, whitespace) parse to exactly the events the generator intended.
func TestParseMatchesGenerator(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for iter := 0; iter < 200; iter++ {
		doc, want := randomDump(rng)
		s := newRecSink(t)
		st, err := ParseDump(bytes.NewReader(doc), s, Limits{})
		if err != nil {
			t.Fatalf("iter %d: %v\n%s", iter, err, doc)
		}
		if st.Partitions != len(want) {
			t.Fatalf("iter %d: %d partitions, want %d", iter, st.Partitions, len(want))
		}
		for i := range want {
			normalise(&s.done[i])
			normalise(&want[i])
			if !reflect.DeepEqual(s.done[i], want[i]) {
				t.Fatalf("iter %d partition %d:\n got %+v\nwant %+v\n%s", iter, i, s.done[i], want[i], doc)
			}
		}
	}
}

func normalise(p *recPart) {
	for i := range p.Events {
		if len(p.Events[i].Blocks) == 0 {
			p.Events[i].Blocks = nil
		}
		if len(p.Events[i].Removed) == 0 {
			p.Events[i].Removed = nil
		}
	}
}

// randomDump generates a dump and the partitions a correct parser must report.
func randomDump(rng *rand.Rand) ([]byte, []recPart) {
	var b bytes.Buffer
	var want []recPart
	ws := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t", "  \r\n"}[rng.IntN(4)])
		}
	}
	b.WriteByte('{')
	np := rng.IntN(4)
	for p := 0; p < np; p++ {
		if p > 0 {
			b.WriteByte(',')
		}
		ws()
		part := Partition{Model: fmt.Sprintf("m%d", p), Group: []string{"default", "g:x", ""}[rng.IntN(3)]}
		rp := recPart{P: part, BS: uint32(1 + rng.IntN(64))}
		fmt.Fprintf(&b, "%q:", part.String())
		ws()
		b.WriteByte('{')
		bsFirst := rng.IntN(2) == 0
		if bsFirst {
			fmt.Fprintf(&b, `"block_size":%d,`, rp.BS)
		}
		if rng.IntN(3) == 0 {
			b.WriteString(`"meta":{"v":[1,"x",null]},`)
		}
		b.WriteString(`"events":[`)
		ne := rng.IntN(6)
		for e := 0; e < ne; e++ {
			if e > 0 {
				b.WriteByte(',')
			}
			ws()
			ev := RouterEvent{WorkerID: rng.Uint64() >> rng.IntN(64), DPRank: uint32(rng.IntN(8)), EventID: uint64(e), Tier: kvwire.Tier(rng.IntN(4))}
			var data string
			switch rng.IntN(3) {
			case 0:
				ev.Kind = EventStored
				if rng.IntN(2) == 0 {
					ev.Parent, ev.HasParent = rng.Uint64(), true
				}
				var blocks []string
				for k := 0; k < 1+rng.IntN(4); k++ {
					blk := Block{rng.Uint64(), rng.Uint64()}
					ev.Blocks = append(ev.Blocks, blk)
					blocks = append(blocks, fmt.Sprintf(`{"tokens_hash":%d,"mm_extra_info":null,"block_hash":%d}`, blk.TokensHash, blk.BlockHash))
				}
				parent := "null"
				if ev.HasParent {
					parent = fmt.Sprint(ev.Parent)
				}
				data = fmt.Sprintf(`{"stored":{"blocks":[%s],"parent_hash":%s,"start_position":null}}`, strings.Join(blocks, ","), parent)
			case 1:
				ev.Kind = EventRemoved
				var hs []string
				for k := 0; k < rng.IntN(4); k++ {
					h := rng.Uint64()
					ev.Removed = append(ev.Removed, h)
					hs = append(hs, fmt.Sprint(h))
				}
				data = `{"removed":{"block_hashes":[` + strings.Join(hs, ",") + `]}}`
			default:
				ev.Kind = EventCleared
				data = `"cleared"`
			}
			tier := ""
			if ev.Tier != kvwire.TierDevice || rng.IntN(2) == 0 {
				tier = fmt.Sprintf(`"storage_tier":%q,`, ev.Tier.String())
			}
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&b, `{%s"event":{"dp_rank":%d,"data":%s,"event_id":%d},"worker_id":%d}`, tier, ev.DPRank, data, ev.EventID, ev.WorkerID)
			} else {
				fmt.Fprintf(&b, `{"worker_id":%d,%s"event":{"event_id":%d,"data":%s,"dp_rank":%d}}`, ev.WorkerID, tier, ev.EventID, data, ev.DPRank)
			}
			rp.Events = append(rp.Events, ev)
		}
		b.WriteByte(']')
		if !bsFirst {
			fmt.Fprintf(&b, `,"block_size":%d`, rp.BS)
		}
		b.WriteByte('}')
		want = append(want, rp)
	}
	ws()
	b.WriteByte('}')
	return b.Bytes(), want
}

// FuzzParseDump: no input panics, the sink protocol holds, and an accepted document's stats
// agree with what the sink saw.
func FuzzParseDump(f *testing.F) {
	raw, err := os.ReadFile("testdata/dynamo_dump.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(genDump(2, 2, 2))
	f.Add([]byte(`{"m:g":{"error":"x"}}`))
	f.Add([]byte(`{"m":{"block_size":1,"events":[]}}`))
	f.Add([]byte(`{"m:g":{"block_size":1,"events":[{"worker_id":1,"event":{"event_id":0,"data":"cleared","dp_rank":0}}]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s := newRecSink(t)
		st, err := ParseDump(bytes.NewReader(doc), s, Limits{MaxEventBytes: 1 << 16, MaxBlocksPerEvent: 64})
		if s.cur != nil {
			t.Fatalf("partition left open (err %v)", err)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if st.Partitions != len(s.done) || st.Blocks != s.blocks() {
			t.Fatalf("stats %+v but sink saw %d partitions, %d blocks", st, len(s.done), s.blocks())
		}
	})
}
