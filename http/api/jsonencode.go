package api

import (
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/jsonw"
)

// Reflection-free response encoding for the hot routes. The output is byte-identical to
// encoding/json's for the same value (field order, omitempty, null for nil slices and maps,
// sorted map keys, and its string escaping: HTML characters, U+2028/U+2029 and invalid UTF-8),
// which TestSelectResponseEncodingMatchesStdlib checks on random responses. Other responses
// still go through writeJSON.
//
// Buffers come from respPool and are returned after the write: http.ResponseWriter.Write does
// not retain its argument (io.Writer's contract), so reuse is safe.

// respPool recycles response buffers; ones that grew past maxPooledResp are dropped.
var respPool = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

const maxPooledResp = 64 << 10

// jsonContentType is the shared Content-Type header value. net/http only reads header values,
// and Header.Set/Add never write into an existing slice of length = capacity 1, so sharing it
// saves an allocation per response.
var jsonContentType = []string{"application/json"}

// okBytes is Dynamo's success body for routes without a payload, pre-encoded.
var okBytes = []byte(`{"status":"ok"}`)

// writeRaw writes an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeSelectResponse writes a /select or /select_and_reserve answer. The buffer goes back to
// the pool after Write returns; one that grew past maxPooledResp (a huge sequence_hashes echo)
// is left to the garbage collector instead.
func writeSelectResponse(w http.ResponseWriter, status int, r *core.SelectResponse) {
	bp := respPool.Get().(*[]byte)
	b := appendSelectResponse((*bp)[:0], r)
	writeRaw(w, status, b)
	if cap(b) <= maxPooledResp {
		*bp = b[:0]
		respPool.Put(bp)
	}
}

// appendSelectResponse appends r's JSON encoding to b.
//
// Field order is the struct's, with the embedded *Booked's fields at its position (after
// selection_id), which is where encoding/json puts promoted fields. Pointer fields tagged
// omitempty are left out when nil; Booked's sequence_hashes has no omitempty, so a nil slice
// is null. If a field is added to SelectResponse in core/engine, the property test fails until
// it is added here.
func appendSelectResponse(b []byte, r *engine.SelectResponse) []byte {
	b = append(b, '{')
	if r.SelectionID != nil {
		b = append(b, `"selection_id":`...)
		b = jsonw.AppendString(b, *r.SelectionID)
		b = append(b, ',')
	}
	if bk := r.Booked; bk != nil {
		b = append(b, `"sequence_hashes":`...)
		b = appendInt64s(b, bk.SequenceHashes)
		b = append(b, `,"isl_tokens":`...)
		b = strconv.AppendUint(b, bk.ISLTokens, 10)
		b = append(b, `,"track_prefill_tokens":`...)
		b = strconv.AppendBool(b, bk.TrackPrefillTokens)
		b = append(b, ',')
	}
	b = appendTarget(b, r.ModelName, r.RoutingGroup, r.WorkerID, r.DPRank, r.Endpoint)
	b = append(b, `,"block_size":`...)
	b = strconv.AppendUint(b, uint64(r.BlockSize), 10)
	b = append(b, `,"overlap":`...)
	b = appendOverlap(b, &r.Overlap)
	b = append(b, `,"effective_prefill_tokens":`...)
	b = strconv.AppendUint(b, r.EffectivePrefillTokens, 10)
	b = append(b, `,"potential_decode_blocks":`...)
	b = strconv.AppendUint(b, r.PotentialDecodeBlocks, 10)
	if r.DecodeBusy != nil {
		b = append(b, `,"decode_busy":`...)
		b = strconv.AppendBool(b, *r.DecodeBusy)
	}
	if wl := r.WorkerLoad; wl != nil {
		b = append(b, `,"worker_load":{"active_prefill_tokens":`...)
		b = strconv.AppendUint(b, wl.ActivePrefillTokens, 10)
		b = append(b, `,"prefill_token_capacity":`...)
		b = strconv.AppendUint(b, wl.PrefillTokenCapacity, 10)
		if wl.TotalKVBlocks != nil {
			b = append(b, `,"total_kv_blocks":`...)
			b = strconv.AppendUint(b, *wl.TotalKVBlocks, 10)
		}
		if wl.PrefillBusy != nil {
			b = append(b, `,"prefill_busy":`...)
			b = strconv.AppendBool(b, *wl.PrefillBusy)
		}
		b = append(b, '}')
	}
	if h := r.KVHint; h != nil {
		b = append(b, `,"kv_hint":`...)
		b = appendKVHint(b, h)
	}
	return append(b, '}')
}

// writeReservationResponse writes the 201 answer of POST /reservations.
func writeReservationResponse(w http.ResponseWriter, status int, r *core.ReservationResponse) {
	bp := respPool.Get().(*[]byte)
	b := appendReservationResponse((*bp)[:0], r)
	writeRaw(w, status, b)
	*bp = b[:0]
	respPool.Put(bp)
}

// appendReservationResponse appends r's JSON encoding to b.
func appendReservationResponse(b []byte, r *engine.ReservationResponse) []byte {
	b = append(b, `{"selection_id":`...)
	b = jsonw.AppendString(b, r.SelectionID)
	b = append(b, ',')
	b = appendTarget(b, r.ModelName, r.RoutingGroup, r.WorkerID, r.DPRank, r.Endpoint)
	return append(b, '}')
}

// appendTarget appends the fields naming where a request goes, shared by the selection and
// reservation answers: "model_name", "routing_group", "worker_id", "dp_rank", "endpoint".
func appendTarget(b []byte, model, group string, worker uint64, rank uint32, endpoint string) []byte {
	b = append(b, `"model_name":`...)
	b = jsonw.AppendString(b, model)
	b = append(b, `,"routing_group":`...)
	b = jsonw.AppendString(b, group)
	b = append(b, `,"worker_id":`...)
	b = strconv.AppendUint(b, worker, 10)
	b = append(b, `,"dp_rank":`...)
	b = strconv.AppendUint(b, uint64(rank), 10)
	b = append(b, `,"endpoint":`...)
	return jsonw.AppendString(b, endpoint)
}

// appendOverlap appends the tier summary; dp's keys are sorted as encoding/json sorts them.
func appendOverlap(b []byte, o *engine.OverlapSummary) []byte {
	b = append(b, `{"longest_matched":`...)
	b = strconv.AppendUint(b, o.LongestMatched, 10)
	b = append(b, `,"gpu":`...)
	b = strconv.AppendUint(b, o.GPU, 10)
	b = append(b, `,"dp":`...)
	// A nil map is null, an empty one {} (encoding/json's distinction; the engine always
	// sets dp, but the encoder does not rely on it).
	if o.DP == nil {
		b = append(b, "null"...)
	} else {
		// A handful of ranks: collect the keys on the stack when they fit.
		var keyBuf [16]string
		keys := keyBuf[:0]
		for k := range o.DP {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(b, k)
			b = append(b, ':')
			b = strconv.AppendUint(b, o.DP[k], 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"cpu":`...)
	b = strconv.AppendUint(b, o.CPU, 10)
	b = append(b, `,"disk":`...)
	b = strconv.AppendUint(b, o.Disk, 10)
	return append(b, '}')
}

// appendKVHint appends a KV hint envelope.
func appendKVHint(b []byte, h *engine.KVHint) []byte {
	b = append(b, `{"protocol_version":`...)
	b = jsonw.AppendString(b, h.ProtocolVersion)
	b = append(b, `,"message_id":`...)
	b = jsonw.AppendString(b, h.MessageID)
	b = append(b, `,"actions":`...)
	if h.Actions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range h.Actions {
			a := &h.Actions[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"action_id":`...)
			b = jsonw.AppendString(b, a.ActionID)
			b = append(b, `,"action_type":`...)
			b = jsonw.AppendString(b, a.ActionType)
			b = append(b, `,"action_version":`...)
			b = jsonw.AppendString(b, a.ActionVersion)
			b = append(b, `,"payload":{"source_control_endpoint":`...)
			b = jsonw.AppendString(b, a.Payload.SourceControlEndpoint)
			b = append(b, `,"block_hashes":`...)
			b = appendInt64s(b, a.Payload.BlockHashes)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendInt64s appends a JSON array of integers (null for a nil slice, as encoding/json).
func appendInt64s(b []byte, v []int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return append(b, ']')
}
