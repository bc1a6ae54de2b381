package core

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/recovery"
)

// Recovery throughput. Each op recovers a whole index of about one million (block, owner)
// entries (50 owners × 200 chains × 100 blocks, a third of the chains half in host_pinned too)
// into a fresh service: ns/op is the time to recover a 1M-block index, blocks/s the throughput.
// Run with -benchtime=1x (or 3x): one op is seconds.

// benchSource builds the source index once per benchmark.
func benchSource(b *testing.B) (*Service, int) {
	b.Helper()
	src := newKVService(b, 1)
	register(b, src, "m", 25)
	seedIndex(b, src, indexShape{workers: 25, chains: 200, prefixBlocks: 0, tailBlocks: 100, bases: 1}, rand.New(rand.NewPCG(1, 1)))
	var dump bytes.Buffer
	if err := src.Dump(&dump); err != nil {
		b.Fatal(err)
	}
	st, err := recovery.ParseDump(&dump, &tupleSink{}, recovery.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	return src, st.Blocks // blocks in the dump (removals already applied)
}

// BenchmarkRecoverInProcess parses a 1M-block dump from memory, stages it and installs it.
func BenchmarkRecoverInProcess(b *testing.B) {
	src, blocks := benchSource(b)
	var dump bytes.Buffer
	if err := src.Dump(&dump); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(dump.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := newKVService(b, 2)
		sink := newStagingSink(dst)
		st, err := recovery.ParseDump(bytes.NewReader(dump.Bytes()), sink, recovery.Limits{})
		if err != nil || st.Blocks != blocks {
			b.Fatalf("parse: %v, %d blocks of %d", err, st.Blocks, blocks)
		}
		if rep := sink.commit(); rep.partitions != 1 {
			b.Fatalf("install %+v", rep)
		}
	}
	b.ReportMetric(float64(blocks)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(blocks), "blocks/op")
}

// BenchmarkRecoverNATS pulls the same index from a serving replica over loopback NATS (1 MiB
// max payload, so chunks of 1 MiB − 4 KiB) and installs it. The serving side encodes the
// snapshot on every op (a new snapshot id each time).
func BenchmarkRecoverNATS(b *testing.B) {
	srv := natstest.RunServer(b)
	src, blocks := benchSource(b)
	a, nc := natsReplica(b, srv.ClientURL(), "a", 1)
	a.eng, src.eng = src.eng, a.eng // serve the prebuilt index
	if err := a.ServeSnapshots(recovery.ServerOptions{MaxSnapshots: 1 << 10}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var bytesMoved int64
	for i := 0; i < b.N; i++ {
		dst, _ := natsReplica(b, srv.ClientURL(), "b", uint64(2+i), "a")
		st := dst.Recover(context.Background(), RecoveryConfig{MaxChunk: recovery.ChunkLimit(nc.MaxPayload())})
		if st.Source != "nats" || st.Blocks != blocks {
			b.Fatalf("status %+v (want %d blocks)", st, blocks)
		}
		bytesMoved = st.Bytes
	}
	b.SetBytes(bytesMoved)
	b.ReportMetric(float64(blocks)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
}
