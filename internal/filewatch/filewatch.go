// Package filewatch calls back when a file may have changed, in a way that survives the
// replacements editors and Kubernetes make: it watches the file's directory (fsnotify), not the
// file, so a rename-over (vim, atomic writers) or a ConfigMap's ..data symlink swap is seen even
// though the watched inode is replaced. Events are debounced; the callback receives no event
// details and must re-read the file and decide itself whether anything changed.
package filewatch

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long events are coalesced before the callback runs.
const DefaultDebounce = 100 * time.Millisecond

// maxWaitFactor bounds how long a burst can postpone the callback: at most
// maxWaitFactor*debounce after the burst's first event, however long events keep coming.
const maxWaitFactor = 10

// Watch watches path's directory until ctx is done and calls changed (from one goroutine, never
// concurrently) after each burst of events in that directory. Events for other files in the
// directory are included on purpose: a ConfigMap update touches only ..data and timestamped
// directories, never the file's own name. onErr, when non-nil, receives watcher errors. Watch
// returns once the watch is established (or failed to be); the loop runs in a goroutine that
// ends with ctx, and done is closed when it has.
//
// Debouncing: the callback runs once the directory has been quiet for debounce, but no later
// than 10*debounce after the first event it has not yet covered, so a neighbour that changes
// continuously (a log file, a heartbeat) cannot postpone it forever. Every event is followed by
// a callback that starts after it; no callback starts after done is closed.
func Watch(ctx context.Context, path string, debounce time.Duration, changed func(), onErr func(error)) (done <-chan struct{}, err error) {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("filewatch: %w", err)
	}
	dir := filepath.Dir(path)
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("filewatch: watching %s: %w", dir, err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		t := time.NewTimer(time.Hour)
		t.Stop()
		defer t.Stop()
		var first time.Time // first event not yet covered by a callback; zero when none
		maxWait := maxWaitFactor * debounce
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				now := time.Now()
				if first.IsZero() {
					first = now
				}
				wait := debounce
				if left := maxWait - now.Sub(first); left < wait {
					wait = max(left, 0)
				}
				t.Reset(wait)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				if onErr != nil {
					onErr(err)
				}
			case <-t.C:
				first = time.Time{}
				if ctx.Err() != nil {
					return
				}
				changed()
			}
		}
	}()
	return ch, nil
}
