package core_test

// The workers file with a real fsnotify watcher on a temporary directory: the first snapshot is
// applied before WatchWorkersFile returns, edits reconcile the catalog (upsert changed, delete
// removed, leave unchanged alone), API writes to file-owned ids are 409 while other API workers
// are untouched, a file that does not parse changes nothing, a failed apply is retried, and a
// Kubernetes ConfigMap-style symlink swap is followed.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

const fileWait = 30 * time.Second

func newFileService(t *testing.T) *core.Service {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func u64(v uint64) *uint64 { return &v }

// writeAtomic replaces path the way editors and config tools do: write a temp file, rename it.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// catalog renders the catalog as "id=endpoint" entries, sorted by id.
func catalogOf(svc *core.Service) string {
	var out []string
	for _, w := range svc.Workers("", "") {
		ep := ""
		if w.Endpoint != nil {
			ep = *w.Endpoint
		}
		out = append(out, fmt.Sprintf("%d=%s", w.WorkerID, ep))
	}
	return strings.Join(out, " ")
}

func waitCatalog(t *testing.T, svc *core.Service, want string) {
	t.Helper()
	poll.Until(t, fileWait, func() error {
		if got := catalogOf(svc); got != want {
			return fmt.Errorf("catalog %q, want %q (status %+v)", got, want, svc.WorkersFileStatus())
		}
		return nil
	})
}

func waitStatus(t *testing.T, svc *core.Service, what string, cond func(st core.WorkersFileStatus) bool) core.WorkersFileStatus {
	t.Helper()
	var st core.WorkersFileStatus
	poll.True(t, fileWait, what, func() bool {
		st = *svc.WorkersFileStatus()
		return cond(st)
	})
	return st
}

func TestParseWorkersFile(t *testing.T) {
	good := []string{
		"- {worker_id: 1, endpoint: 'http://a:8000', block_size: 16}\n- worker_id: 2\n  data_parallel_size: 2\n  kv_events_endpoints: {'0': tcp://b:5557, '1': tcp://b:5558}\n",
		`[{"worker_id": 1, "endpoint": "http://a:8000"}, {"worker_id": 2}]`,
		"[]",
		"---\n- {worker_id: 1}\n",        // a leading document marker (kubectl, Helm)
		"- {worker_id: 1}\n---\n",        // an empty trailing document holds no workers
		"- {worker_id: 1}\n---\n# end\n", // nor does one of only comments
	}
	for _, g := range good {
		if _, err := core.ParseWorkersFile([]byte(g)); err != nil {
			t.Errorf("%q: %v", g, err)
		}
	}
	specs, _ := core.ParseWorkersFile([]byte(good[0]))
	if len(specs) != 2 || *specs[1].DataParallelSize != 2 || specs[1].KVEventsEndpoints["1"] != "tcp://b:5558" {
		t.Errorf("decoded %+v", specs)
	}
	bad := map[string]string{
		"":                                   "empty",
		"   \n":                              "empty",
		"{worker_id: 1}":                     "list",
		"- 3":                                "mapping",
		"- {endpoint: x}":                    "missing worker_id",
		"- {worker_id: 1}\n- {worker_id: 1}": "both have worker_id 1",
		"- {worker_id: 1, endpont: x}":       "unknown field",
		"- {worker_id: -1}":                  "worker_id",
		"- {worker_id: 1, block_size: big}":  "block_size",
		"[{":                                 "yaml",
		"- {worker_id: 1}\n---\n- {worker_id: 2}": "more than one YAML document",
		"[]\n---\n[]\n":      "more than one YAML document",
		"[]\n---\n[{\n":      "more than one YAML document",
		"# only a comment\n": "empty",
	}
	for in, want := range bad {
		_, err := core.ParseWorkersFile([]byte(in))
		if !errors.Is(err, core.ErrWorkersFile) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("%q: got %v, want ErrWorkersFile mentioning %q", in, err, want)
		}
	}
	if _, err := core.ParseWorkersFile(make([]byte, core.MaxWorkersFileBytes+1)); !errors.Is(err, core.ErrWorkersFile) {
		t.Errorf("oversized file: %v", err)
	}
}

func FuzzParseWorkersFile(f *testing.F) {
	f.Add([]byte("- {worker_id: 1, endpoint: 'http://a:8000'}"))
	f.Add([]byte(`[{"worker_id": 2, "taints": ["spot"]}]`))
	f.Add([]byte("- &a {worker_id: 1}\n- *a"))
	f.Add([]byte("- {worker_id: 1}\n---\n- {worker_id: 2}\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := core.ParseWorkersFile(data)
		if err != nil {
			if !errors.Is(err, core.ErrWorkersFile) {
				t.Fatalf("error %v does not wrap ErrWorkersFile", err)
			}
			return
		}
		seen := map[uint64]bool{}
		for _, s := range specs {
			if s.WorkerID == nil || seen[*s.WorkerID] {
				t.Fatalf("accepted a record without a unique worker_id: %+v", specs)
			}
			seen[*s.WorkerID] = true
		}
	})
}

func TestWorkersFileReconciles(t *testing.T) {
	svc := newFileService(t)
	// An API-registered worker that the file never lists.
	if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: u64(10), Endpoint: ptr("http://api:8000")}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "workers.yaml")
	writeAtomic(t, path, "- {worker_id: 1, endpoint: 'http://w1:8000', block_size: 16}\n- {worker_id: 2, endpoint: 'http://w2:8000', block_size: 16}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := svc.WatchWorkersFile(ctx, core.WorkersFileConfig{Path: path}); err != nil {
		t.Fatal(err)
	}
	// The first snapshot is applied synchronously: ready without anyone calling the API.
	if got := catalogOf(svc); got != "1=http://w1:8000 2=http://w2:8000 10=http://api:8000" {
		t.Fatalf("after the first snapshot: %q", got)
	}
	if !svc.Ready().Ready {
		t.Fatal("not ready after the first snapshot")
	}

	// Coexistence: file-owned ids refuse API writes; other ids are the API's.
	for name, call := range map[string]func() error{
		"POST":   func() error { _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: u64(1)}); return err },
		"PATCH":  func() error { _, err := svc.PatchWorker(2, core.WorkerPatch{Endpoint: ptr("http://x")}); return err },
		"DELETE": func() error { _, err := svc.DeleteWorker(1); return err },
	} {
		if err := call(); !errors.Is(err, core.ErrConflict) {
			t.Errorf("%s on a file-owned worker: %v, want ErrConflict", name, err)
		}
	}
	if _, err := svc.PatchWorker(10, core.WorkerPatch{Endpoint: ptr("http://api2:8000")}); err != nil {
		t.Fatalf("PATCH of an API worker: %v", err)
	}

	// Edit: worker 1 removed, worker 2 unchanged, worker 3 added.
	writeAtomic(t, path, "- {worker_id: 2, endpoint: 'http://w2:8000', block_size: 16}\n- {worker_id: 3, endpoint: 'http://w3:8000', block_size: 16}\n")
	waitCatalog(t, svc, "2=http://w2:8000 3=http://w3:8000 10=http://api2:8000")
	st := waitStatus(t, svc, "second snapshot counted", func(st core.WorkersFileStatus) bool { return st.SnapshotsApplied == 2 })
	if st.Last != (core.SnapshotResult{Upserted: 1, Deleted: 1, Unchanged: 1}) || st.OwnedWorkers != 2 {
		t.Fatalf("second snapshot: %+v", st)
	}
	// Worker 1 left the file: its id is the API's again.
	if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: u64(1), Endpoint: ptr("http://api-1:8000")}); err != nil {
		t.Fatalf("POST of an id the file released: %v", err)
	}

	// A file that does not parse changes nothing.
	writeAtomic(t, path, "- {worker_id: 2, endpoint: [unclosed\n")
	st = waitStatus(t, svc, "parse error reported", func(st core.WorkersFileStatus) bool { return st.ParseErrors == 1 })
	if st.LastError == "" || st.SnapshotsApplied != 2 {
		t.Fatalf("after a bad file: %+v", st)
	}
	if got := catalogOf(svc); got != "1=http://api-1:8000 2=http://w2:8000 3=http://w3:8000 10=http://api2:8000" {
		t.Fatalf("a bad file changed the catalog: %q", got)
	}

	// Back to a good file: applied, error cleared.
	writeAtomic(t, path, "- {worker_id: 3, endpoint: 'http://w3b:8000', block_size: 16}\n")
	waitCatalog(t, svc, "1=http://api-1:8000 3=http://w3b:8000 10=http://api2:8000")
	waitStatus(t, svc, "error cleared", func(st core.WorkersFileStatus) bool { return st.LastError == "" && st.SnapshotsApplied == 3 })
}

func TestWorkersFileRetriesFailedApply(t *testing.T) {
	svc := newFileService(t)
	path := filepath.Join(t.TempDir(), "workers.json")
	// Worker 2 parses but the catalog rejects it (422, as POST /workers would); worker 1 applies.
	bad := `[{"worker_id":1,"endpoint":"http://w1:8000"},{"worker_id":2,"endpoint":"http://w2:8000","kv_transfer_enforcement":"sometimes"}]`
	writeAtomic(t, path, bad)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := svc.WatchWorkersFile(ctx, core.WorkersFileConfig{Path: path, Retry: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := catalogOf(svc); got != "1=http://w1:8000" {
		t.Fatalf("catalog %q", got)
	}
	// With no file event at all, the failed snapshot is applied again after Retry.
	st := waitStatus(t, svc, "retries", func(st core.WorkersFileStatus) bool { return st.ApplyFailures >= 3 })
	if st.Last.Failed != 1 || st.Last.Unchanged != 1 || st.SnapshotsApplied != 0 || !strings.Contains(st.LastError, "worker 2") {
		t.Fatalf("retry status: %+v", st)
	}
	// The failed worker's id is file-owned even so: the API cannot race the retry.
	if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: u64(2)}); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("POST of a failed file worker: %v", err)
	}
	// A newer snapshot replaces the pending retry.
	writeAtomic(t, path, `[{"worker_id":1,"endpoint":"http://w1:8000"},{"worker_id":2,"endpoint":"http://w2:8000","data_parallel_size":2}]`)
	waitCatalog(t, svc, "1=http://w1:8000 2=http://w2:8000")
	st = waitStatus(t, svc, "applied", func(st core.WorkersFileStatus) bool { return st.SnapshotsApplied == 1 })
	if st.LastError != "" || st.Last != (core.SnapshotResult{Upserted: 1, Unchanged: 1}) {
		t.Fatalf("after the fix: %+v", st)
	}
}

func TestWorkersFileFollowsConfigMapSwap(t *testing.T) {
	svc := newFileService(t)
	dir := t.TempDir()
	// The kubelet's layout: workers.yaml -> ..data/workers.yaml, ..data -> ..<timestamp>.
	version := func(name, content string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "workers.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "- {worker_id: 1, endpoint: 'http://v1:8000'}\n")
	if err := os.Symlink("..data/workers.yaml", filepath.Join(dir, "workers.yaml")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := svc.WatchWorkersFile(ctx, core.WorkersFileConfig{Path: filepath.Join(dir, "workers.yaml")}); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, svc, "1=http://v1:8000")
	version("..v2", "- {worker_id: 1, endpoint: 'http://v2:8000'}\n- {worker_id: 2, endpoint: 'http://v2b:8000'}\n")
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	waitCatalog(t, svc, "1=http://v2:8000 2=http://v2b:8000")
	if ids := svc.WorkersFileStatus(); ids.OwnedWorkers != 2 {
		t.Fatalf("status %+v", ids)
	}
}

// The watch fires on every event in the file's directory. A broken file is reported once, not
// once per event: with the service's own log in that directory, one report per event would feed
// itself forever. A later, different failure is reported again.
func TestWorkersFileReportsAnUnchangedFailureOnce(t *testing.T) {
	svc := newFileService(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "workers.yaml")
	writeAtomic(t, path, "- {worker_id: 1, endpoint: [unclosed\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := svc.WatchWorkersFile(ctx, core.WorkersFileConfig{Path: path, Debounce: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "first failure reported", func(st core.WorkersFileStatus) bool { return st.ParseErrors == 1 })
	// Churn another file in the directory, then make a change the watcher must see, so that the
	// churn's events have certainly been processed before the count is read.
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(dir, "app.log"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomic(t, path, "- {worker_id: 1, endpoint: 'http://w1:8000', block_size: 16}\n- {worker_id: 2, endpoint: [still broken\n")
	st := waitStatus(t, svc, "second, different failure reported", func(st core.WorkersFileStatus) bool { return st.ParseErrors >= 2 })
	if st.ParseErrors != 2 {
		t.Fatalf("parse errors %d after 20 unrelated events and one new failure, want 2", st.ParseErrors)
	}
	writeAtomic(t, path, "- {worker_id: 1, endpoint: 'http://w1:8000', block_size: 16}\n")
	waitCatalog(t, svc, "1=http://w1:8000")
}
