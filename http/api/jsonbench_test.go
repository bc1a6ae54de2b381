package api

// Micro-benchmarks of the request decoder and the response encoder against encoding/json on
// the same values, isolated from the engine and net/http (so they are far less noisy than the
// handler benchmarks on a shared machine):
//
//	go test ./http/api -run '^$' -bench 'Decode|Encode' -benchtime=10000x

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// benchSelectBody is a /select body with a 512-token prompt of six-digit ids (as a tokenizer
// with a large vocabulary produces), plus the two strings a client usually sends. Both decode
// benchmarks allocate the request fresh each time, as a handler does.
func benchSelectBody() []byte {
	var sb strings.Builder
	sb.WriteString(`{"selection_id":"req-1","model_name":"default","token_ids":[`)
	for j := range 512 {
		if j > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(100000 + j*37))
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

func BenchmarkDecodeSelectStrict(b *testing.B) {
	body := benchSelectBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for range b.N {
		var req core.SelectRequest
		if err := decodeBody(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSelectStdlib(b *testing.B) {
	body := benchSelectBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for range b.N {
		var req core.SelectRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// benchResponse is a booked answer with 32 sequence hashes and a two-rank dp map: what
// /select_and_reserve returns for a 512-token prompt with block size 16. The appender reuses
// its buffer across iterations, as the handler does through respPool.
func benchResponse() *engine.SelectResponse {
	id := "b6c6e370-deb0-492a-9a8c-52843324f9a4"
	hs := make([]int64, 32)
	for i := range hs {
		hs[i] = int64(i)*-7919173 + 1<<60
	}
	return &engine.SelectResponse{SelectionID: &id, Booked: &engine.Booked{SequenceHashes: hs, ISLTokens: 512, TrackPrefillTokens: true},
		ModelName: "default", RoutingGroup: "default", WorkerID: 3, Endpoint: "http://worker-3:8000", BlockSize: 16,
		Overlap:                engine.OverlapSummary{LongestMatched: 256, GPU: 256, DP: map[string]uint64{"0": 256, "1": 0}},
		EffectivePrefillTokens: 256, PotentialDecodeBlocks: 40}
}

func BenchmarkEncodeSelectResponseAppend(b *testing.B) {
	r := benchResponse()
	b.ReportAllocs()
	var buf []byte
	for range b.N {
		buf = appendSelectResponse(buf[:0], r)
	}
}

func BenchmarkEncodeSelectResponseStdlib(b *testing.B) {
	r := benchResponse()
	b.ReportAllocs()
	for range b.N {
		if _, err := json.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
}
