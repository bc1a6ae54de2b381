package sim

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// TraceBlockTokens is the block size of Mooncake hash_ids (512 tokens per id).
const TraceBlockTokens = 512

// Request is one trace request.
type Request struct {
	ArrivalMS float64  // milliseconds since the trace start
	Input     int      // prompt tokens
	Output    int      // generated tokens
	Blocks    []uint64 // prefix-block ids: equal id at equal position ⇒ reusable KV
}

// LoadTrace reads a Mooncake JSONL trace or an Azure 2023 CSV trace (by extension), or generates
// the synthetic trace a "synth:" path names (see SynthPrefix), keeping at most limit requests
// (0 = all).
func LoadTrace(path string, limit int) ([]Request, error) {
	if strings.HasPrefix(path, SynthPrefix) {
		reqs, err := Synth(path)
		if limit > 0 && len(reqs) > limit {
			reqs = reqs[:limit]
		}
		return reqs, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if strings.HasSuffix(path, ".csv") {
		return ReadAzure(f, limit)
	}
	return ReadMooncake(f, limit)
}

// ReadMooncake parses Mooncake JSONL: {"timestamp","input_length","output_length","hash_ids"}.
func ReadMooncake(r io.Reader, limit int) ([]Request, error) {
	var out []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var rec struct {
			Timestamp    *float64 `json:"timestamp"`
			Delay        *float64 `json:"delay"`
			InputLength  int      `json:"input_length"`
			OutputLength int      `json:"output_length"`
			HashIDs      []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		req := Request{Input: rec.InputLength, Output: max(rec.OutputLength, 1), Blocks: rec.HashIDs}
		switch {
		case rec.Timestamp != nil:
			req.ArrivalMS = *rec.Timestamp
		case rec.Delay != nil && len(out) > 0:
			req.ArrivalMS = out[len(out)-1].ArrivalMS + *rec.Delay
		}
		if req.Input <= 0 {
			req.Input = len(req.Blocks) * TraceBlockTokens
		}
		out = append(out, req)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, sc.Err()
}

// ReadAzure parses the Azure LLM inference trace 2023 CSV (TIMESTAMP,ContextTokens,
// GeneratedTokens). It carries no prefix information: every request gets fresh block ids, so
// no routing can reuse cache and the trace measures load balancing alone.
func ReadAzure(r io.Reader, limit int) ([]Request, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("azure header: %w", err)
	}
	var out []Request
	var t0 time.Time
	next := uint64(1) << 40 // disjoint from any Mooncake id
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		ts, err := time.Parse("2006-01-02 15:04:05.9999999", rec[0])
		if err != nil {
			return nil, fmt.Errorf("azure timestamp %q: %w", rec[0], err)
		}
		if t0.IsZero() {
			t0 = ts
		}
		in, err1 := strconv.Atoi(rec[1])
		outTok, err2 := strconv.Atoi(rec[2])
		if err1 != nil || err2 != nil || in <= 0 {
			return nil, fmt.Errorf("azure record %v: bad token counts", rec)
		}
		n := int(math.Ceil(float64(in) / TraceBlockTokens))
		blocks := make([]uint64, n)
		for i := range blocks {
			blocks[i] = next
			next++
		}
		out = append(out, Request{ArrivalMS: float64(ts.Sub(t0)) / float64(time.Millisecond), Input: in, Output: max(outTok, 1), Blocks: blocks})
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// IdealHitRate is the token-level prefix reuse of an infinite single cache: the upper bound of
// any routing policy's hit rate.
func IdealHitRate(reqs []Request) float64 {
	seen := make(map[uint64]struct{})
	var hit, total float64
	for _, r := range reqs {
		k := 0
		for k < len(r.Blocks) {
			if _, ok := seen[r.Blocks[k]]; !ok {
				break
			}
			k++
		}
		hit += float64(min(k*TraceBlockTokens, r.Input))
		total += float64(r.Input)
		for _, b := range r.Blocks {
			seen[b] = struct{}{}
		}
	}
	if total == 0 {
		return 0
	}
	return hit / total
}
