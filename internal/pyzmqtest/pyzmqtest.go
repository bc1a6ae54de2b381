// Package pyzmqtest runs the Python side of the ZeroMQ interop tests: it finds an interpreter
// that can import zmq and msgpack (Debian's python3-zmq and python3-msgpack, which .ci/run
// installs) and drives publisher scripts over their stdin/stdout line protocol (Process).
package pyzmqtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python returns an interpreter that imports zmq and msgpack. Debian's packages are visible to
// /usr/bin/python3 even where a pyenv shim shadows it on PATH, so that one is tried first, then
// python3 from PATH. Missing packages skip the test locally and fail it when CI is set, so CI
// can never silently lose the interop coverage.
func Python(t testing.TB) string {
	t.Helper()
	var tried []string
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil && p != cands[0] {
		cands = append(cands, p)
	}
	for _, py := range cands {
		out, err := exec.Command(py, "-c", "import zmq, msgpack").CombinedOutput()
		if err == nil {
			return py
		}
		tried = append(tried, fmt.Sprintf("%s: %v %s", py, err, strings.TrimSpace(string(out))))
	}
	msg := "python3 with zmq and msgpack (Debian python3-zmq, python3-msgpack) not available: " + strings.Join(tried, "; ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
