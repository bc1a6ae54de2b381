package filewatch_test

// Real-watcher tests (fsnotify on temp directories). Every wait polls a condition against
// poll.Generous; nothing sleeps to synchronise.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/filewatch"
	"github.com/kvselect/kvselect/internal/poll"
)

// recorder is a callback that re-reads the watched file, as real callers do, and checks that
// the watcher never runs it concurrently with itself.
type recorder struct {
	path     string
	calls    atomic.Int64
	inFlight atomic.Int32
	overlap  atomic.Bool
	mu       sync.Mutex
	last     string // content read by the latest callback
}

func (r *recorder) changed() {
	if r.inFlight.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.inFlight.Add(-1)
	r.calls.Add(1)
	b, err := os.ReadFile(r.path)
	r.mu.Lock()
	if err != nil {
		r.last = "error: " + err.Error()
	} else {
		r.last = string(b)
	}
	r.mu.Unlock()
}

func (r *recorder) content() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// waitContent polls until a callback has read want from the file.
func (r *recorder) waitContent(t *testing.T, want string) {
	t.Helper()
	poll.Until(t, poll.Generous, func() error {
		if got := r.content(); got != want {
			return fmt.Errorf("callback read %q (after %d calls), want %q", got, r.calls.Load(), want)
		}
		return nil
	})
	if r.overlap.Load() {
		t.Fatal("the callback ran concurrently with itself")
	}
}

// start watches path with debounce until the test ends, failing on watcher errors.
func start(t *testing.T, path string, debounce time.Duration) (*recorder, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	r := &recorder{path: path}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := filewatch.Watch(ctx, path, debounce, r.changed, func(err error) { t.Errorf("watch error: %v", err) })
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		waitDone(t, done)
	})
	return r, cancel, done
}

func waitDone(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(poll.Generous):
		t.Fatalf("the watch goroutine did not end within %v of ctx cancel", poll.Generous)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver replaces path the way atomic writers (and vim) do: a new inode renamed over it.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestCallbackAfterInPlaceWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.yaml")
	write(t, path, "v1")
	r, _, _ := start(t, path, 10*time.Millisecond)
	write(t, path, "v2")
	r.waitContent(t, "v2")
	write(t, path, "v3")
	r.waitContent(t, "v3")
}

func TestCallbackAfterRenameOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.yaml")
	write(t, path, "v1")
	r, _, _ := start(t, path, 10*time.Millisecond)
	// Twice: the second replacement is of the inode the first one created, which a watch on
	// the file itself (rather than its directory) would have lost.
	renameOver(t, path, "v2")
	r.waitContent(t, "v2")
	renameOver(t, path, "v3")
	r.waitContent(t, "v3")
}

// TestCallbackAfterConfigMapSwap lays a directory out the way the kubelet's atomic writer
// does for a ConfigMap volume and updates it the same way: the file is a symlink into ..data,
// ..data is a symlink to a timestamped directory, and an update writes a new timestamped
// directory, renames a fresh ..data_tmp symlink over ..data and removes the old directory. The
// file's own name never sees an event.
func TestCallbackAfterConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "workers.yaml"), content)
	}
	version("..2026_12_01_00_00_00.1", "v1")
	if err := os.Symlink("..2026_12_01_00_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "workers.yaml")
	if err := os.Symlink(filepath.Join("..data", "workers.yaml"), path); err != nil {
		t.Fatal(err)
	}
	r, _, _ := start(t, path, 10*time.Millisecond)

	swap := func(old, next, content string) {
		version(next, content)
		if err := os.Symlink(next, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
	swap("..2026_12_01_00_00_00.1", "..2026_12_01_00_01_00.2", "v2")
	r.waitContent(t, "v2")
	swap("..2026_12_01_00_01_00.2", "..2026_12_01_00_02_00.3", "v3")
	r.waitContent(t, "v3")
}

// TestDebounceCoalescesABurst: a burst of writes (each several inotify events) yields a few
// callbacks, not one per event, and the last callback sees the final content.
func TestDebounceCoalescesABurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.yaml")
	write(t, path, "v0")
	r, _, _ := start(t, path, 300*time.Millisecond)
	const writes = 100
	for i := 1; i <= writes; i++ {
		renameOver(t, path, fmt.Sprintf("v%d", i))
	}
	r.waitContent(t, fmt.Sprintf("v%d", writes))
	// 100 rename-overs are 300+ events. A loaded machine may split the burst, or deliver its
	// tail after the callback that already read the final content, so allow several.
	if n := r.calls.Load(); n < 1 || n > 10 {
		t.Fatalf("%d callbacks for a burst of %d writes, want 1..10", n, writes)
	}
}

// TestNoisyDirectoryDoesNotStarveTheCallback: another file in the same directory changing
// more often than the debounce (a log file, a sidecar's heartbeat) must not postpone the
// callback forever; a change of the watched file is still seen.
func TestNoisyDirectoryDoesNotStarveTheCallback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "workers.yaml")
	write(t, path, "v1")
	r, _, _ := start(t, path, 100*time.Millisecond)
	stop := make(chan struct{})
	noisy := make(chan struct{})
	go func() {
		defer close(noisy)
		tick := time.NewTicker(5 * time.Millisecond) // pacing the noise, not synchronisation
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = os.WriteFile(filepath.Join(dir, "noise.log"), []byte(fmt.Sprint(i)), 0o644)
			}
		}
	}()
	defer func() { close(stop); <-noisy }()
	write(t, path, "v2")
	r.waitContent(t, "v2")
}

// TestCancelEndsTheWatch: cancelling ctx ends the goroutine (done closes) even while events
// keep arriving, and no callback runs after done.
func TestCancelEndsTheWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.yaml")
	write(t, path, "v1")
	r, cancel, done := start(t, path, 10*time.Millisecond)
	write(t, path, "v2")
	r.waitContent(t, "v2")
	cancel()
	waitDone(t, done)
	n := r.calls.Load()
	write(t, path, "v3")
	if r.inFlight.Load() != 0 || r.calls.Load() != n {
		t.Fatal("a callback ran after done was closed")
	}
}

func TestMissingDirectoryIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "workers.yaml")
	done, err := filewatch.Watch(context.Background(), path, 0, func() { t.Error("callback without a watch") }, nil)
	if err == nil || done != nil {
		t.Fatalf("Watch of a file in a missing directory: done %v, err %v; want an error", done, err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v does not wrap os.ErrNotExist", err)
	}
}
