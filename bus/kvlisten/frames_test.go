package kvlisten

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// TestParseLive pins which live frame shapes are accepted.
func TestParseLive(t *testing.T) {
	seq5 := []byte{0, 0, 0, 0, 0, 0, 0, 5}
	cases := []struct {
		name    string
		frames  [][]byte
		seq     uint64
		payload []byte
		ok      bool
	}{
		{"ok", [][]byte{[]byte("kv"), seq5, []byte("p")}, 5, []byte("p"), true},
		{"empty_topic_and_payload", [][]byte{{}, seq5, {}}, 5, []byte{}, true},
		{"max_seq", [][]byte{{}, bytes.Repeat([]byte{0xff}, 8), []byte("p")}, ^uint64(0), []byte("p"), true},
		{"none", nil, 0, nil, false},
		{"two", [][]byte{[]byte("kv"), seq5}, 0, nil, false},
		{"four", [][]byte{[]byte("kv"), seq5, {}, {}}, 0, nil, false},
		{"short_seq", [][]byte{{}, seq5[:7], {}}, 0, nil, false},
		{"long_seq", [][]byte{{}, append(seq5, 0), {}}, 0, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seq, payload, err := parseLive(tc.frames)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v does not wrap ErrMalformed", err)
				}
				return
			}
			if seq != tc.seq || !bytes.Equal(payload, tc.payload) {
				t.Fatalf("got %d %q", seq, payload)
			}
		})
	}
}

// TestParseReplay pins both replay reply shapes, end markers and rejects.
func TestParseReplay(t *testing.T) {
	s := encodeSeq(42)
	end := bytes.Repeat([]byte{0xff}, 8)
	cases := []struct {
		name   string
		frames [][]byte
		want   replayReply
		ok     bool
	}{
		{"vllm_topic", [][]byte{{}, []byte("kv"), s, []byte("p")}, replayReply{42, []byte("p"), false}, true},
		{"sglang", [][]byte{{}, s, []byte("p")}, replayReply{42, []byte("p"), false}, true},
		{"vllm_end", [][]byte{{}, {}, end, {}}, replayReply{kvevents.ReplayEndSeq, []byte{}, true}, true},
		{"sglang_end", [][]byte{{}, end, {}}, replayReply{kvevents.ReplayEndSeq, []byte{}, true}, true},
		{"no_delimiter", [][]byte{[]byte("x"), s, []byte("p")}, replayReply{}, false},
		{"empty", nil, replayReply{}, false},
		{"only_delimiter", [][]byte{{}}, replayReply{}, false},
		{"five", [][]byte{{}, {}, {}, s, {}}, replayReply{}, false},
		{"bad_seq", [][]byte{{}, []byte("kv"), s[:3], []byte("p")}, replayReply{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseReplay(tc.frames)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v does not wrap ErrMalformed", err)
				}
				return
			}
			if got.seq != tc.want.seq || got.end != tc.want.end || !bytes.Equal(got.payload, tc.want.payload) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzValidateEndpoint(f *testing.F) {
	for _, s := range []string{"tcp://127.0.0.1:5557", "tcp://[::1]:1", "ipc:///tmp/x", "tcp://a:b:c", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ep string) {
		if err := ValidateEndpoint(ep); err != nil && !errors.Is(err, ErrInvalidEndpoint) {
			t.Fatalf("error %v does not wrap ErrInvalidEndpoint", err)
		}
	})
}

func TestPublicSchemesInErrors(t *testing.T) {
	got := publicSchemes(`zmq4: could not dial to "` + schemeTCP + `://127.0.0.1:5557": refused; ` + schemeIPC + `:///tmp/x`)
	want := `zmq4: could not dial to "tcp://127.0.0.1:5557": refused; ipc:///tmp/x`
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
