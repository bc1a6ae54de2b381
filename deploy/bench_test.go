package deploy

import "testing"

// BenchmarkCheckTree measures one full run of every deployment check on the real tree (YAML
// decoding, Go source parsing, nats-server config loading per pod, and the loopback HTTP API
// exercised by the examples check): the cost each mutation case of TestDeployMutations pays.
func BenchmarkCheckTree(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := checkTree(repoRoot, b.Setenv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeDocs measures decoding the largest manifest into objects.
func BenchmarkDecodeDocs(b *testing.B) {
	data := mustRead(b, "kubernetes/nats.yaml")
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := decodeDocs(data, "nats.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
