package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

// Fuzz targets for every reader of file contents: YAML documents, the Dockerfile, resource
// quantities, GOMEMLIMIT values and $(VAR) expansion. None may panic; findings must be errors.

// seedFiles adds the shipped files matching glob (under deploy/) to the corpus, so mutation starts
// from realistic documents.
func seedFiles(f *testing.F, glob string) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "deploy", glob))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
}

func FuzzDecodeDocs(f *testing.F) {
	seedFiles(f, "kubernetes/*.yaml")
	seedFiles(f, "examples/*.yaml")
	f.Add("---\n---\napiVersion: v1\nkind: A\nmetadata: {name: x}\n")
	f.Add("- 1\n")
	f.Add("a: &x [*x]\n")
	f.Fuzz(func(t *testing.T, data string) {
		docs, err := decodeDocs([]byte(data), "fuzz")
		if err != nil {
			return
		}
		for _, o := range docs {
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("accepted a document without required fields: %v", o)
			}
			// Typed views of any accepted document decode or fail cleanly.
			var ws workloadSpec
			var ss serviceSpec
			_ = o.field("spec", &ws)
			_ = o.field("spec", &ss)
		}
	})
}

func FuzzDockerfile(f *testing.F) {
	seedFiles(f, "Dockerfile")
	f.Add("FROM a AS b\nRUN go build -o\nFROM scratch\nUSER 0\nENTRYPOINT [\n")
	f.Add("FROM a\\\n")
	f.Fuzz(func(t *testing.T, data string) {
		uid, _ := dockerfileFindings(data, "1.26.0", "8092")
		if uid == 0 {
			t.Fatal("a root USER was reported as usable")
		}
	})
}

func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"2", "500m", "1Gi", "1.5e3", "1E", ".5Ki", "1e-30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if q, err := parseQuantity(s); err == nil && q.Sign() < 0 {
			t.Fatalf("negative quantity %q accepted", s)
		}
		_, _ = parseGoMemLimit(s)
	})
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"tcp://$(POD_NAME):9092", "$$(X)", "$(", "$()"} {
		f.Add(s)
	}
	vars := map[string]string{"POD_NAME": "kvselect-0", "X": "$(POD_NAME)"}
	f.Fuzz(func(t *testing.T, s string) {
		got, _ := expand(s, vars)
		if want := expandReference(s, vars); got != want {
			t.Fatalf("expand(%q) = %q, reference %q", s, got, want)
		}
	})
}

// mustRead reads a file under deploy/.
func mustRead(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
