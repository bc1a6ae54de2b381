package core

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kvselect/kvselect/internal/filewatch"
)

// WorkersFileRetry is how long a failed snapshot apply waits before it is retried (the seed
// contract's discovery rule), unless a newer snapshot arrives first.
const WorkersFileRetry = 5 * time.Second

// WorkersFileConfig configures WatchWorkersFile.
type WorkersFileConfig struct {
	Path string
	// Retry overrides WorkersFileRetry (tests); Debounce overrides filewatch.DefaultDebounce.
	Retry, Debounce time.Duration
}

// WatchWorkersFile makes the file at cfg.Path the source of the workers it lists. The first
// snapshot is read and applied before it returns, so a restarted replica is ready as soon as its
// workers are; then the file's directory is watched and every change is one snapshot:
//
//   - a file that cannot be read or parsed is reported (log, parse_errors, last_error) and
//     changes nothing: the previous catalog stays;
//   - a snapshot whose apply fails is applied again after Retry unless a newer snapshot arrives
//     first (which is applied instead and resets the retry);
//   - a file whose bytes did not change since the last successful apply is not applied again.
//
// The watch ends with ctx or when the service closes. The returned error is only about setting
// up the watch (a missing directory); problems with the file's content are reported, not
// returned.
func (s *Service) WatchWorkersFile(ctx context.Context, cfg WorkersFileConfig) error {
	if cfg.Retry <= 0 {
		cfg.Retry = WorkersFileRetry
	}
	wf := s.enableWorkersFile(cfg.Path)
	wf.note(func(st *WorkersFileStatus) { st.Path = cfg.Path })
	ctx, cancel := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	done, err := filewatch.Watch(ctx, cfg.Path, cfg.Debounce, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, func(err error) { s.log.Warn("workers file: watch error", "path", cfg.Path, "err", err) })
	if err != nil {
		cancel()
		return err
	}
	w := &fileSync{s: s, wf: wf, path: cfg.Path, retryIn: cfg.Retry}
	w.pass() // the first snapshot, synchronously
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-done }()
		defer cancel()
		retry := time.NewTimer(time.Hour)
		retry.Stop()
		defer retry.Stop()
		for {
			if w.failed {
				retry.Reset(cfg.Retry)
			}
			select {
			case <-ctx.Done():
				return
			case <-s.stop:
				return
			case <-wake:
				retry.Stop()
				w.pass()
			case <-retry.C:
				w.retry()
			}
		}
	}()
	return nil
}

// fileSync is the watch loop's state (owned by its goroutine after the first pass).
type fileSync struct {
	s       *Service
	wf      *workersFile
	path    string
	retryIn time.Duration
	applied []byte       // content of the last successfully applied snapshot
	pending []WorkerSpec // the snapshot awaiting a retry
	data    []byte       // its content
	failed  bool
	// lastFail identifies the failure last reported (its error and the bytes read). The watch
	// fires on every event in the file's directory (other files included), so an unchanged
	// failure is reported once, not per event: otherwise a log file in the same directory would
	// feed itself.
	lastFail string
}

// pass reads the file and applies it as a new snapshot when it changed.
func (f *fileSync) pass() {
	data, err := readBounded(f.path)
	if err == nil && f.applied != nil && bytes.Equal(data, f.applied) {
		f.failed, f.pending, f.lastFail = false, nil, "" // back to the applied content: nothing to retry
		return
	}
	var specs []WorkerSpec
	if err == nil {
		specs, err = ParseWorkersFile(data)
	}
	if err != nil {
		if fail := err.Error() + "\x00" + string(data); fail == f.lastFail {
			return // reported already; nothing changed
		} else {
			f.lastFail = fail
		}
		f.s.log.Error("workers file not applied; the previous catalog stays", "path", f.path, "err", err)
		f.wf.note(func(st *WorkersFileStatus) { st.ParseErrors++; st.LastError = err.Error() })
		return
	}
	f.lastFail = ""
	f.pending, f.data = specs, data
	f.apply()
}

// retry applies the pending snapshot again.
func (f *fileSync) retry() {
	if f.pending != nil {
		f.s.log.Info("workers file: retrying the failed snapshot", "path", f.path)
		f.apply()
	}
}

func (f *fileSync) apply() {
	err := f.s.ApplyWorkerSnapshot(f.pending)
	if err != nil {
		f.failed = true
		f.s.log.Error("workers file snapshot failed; retrying", "path", f.path, "err", err, "retry_in", f.retryIn)
		f.wf.note(func(st *WorkersFileStatus) { st.ApplyFailures++; st.LastError = err.Error() })
		return
	}
	f.failed, f.applied, f.pending = false, f.data, nil
	f.s.log.Info("workers file applied", "path", f.path)
	f.wf.note(func(st *WorkersFileStatus) { st.SnapshotsApplied++; st.LastError = "" })
}

// readBounded reads at most MaxWorkersFileBytes+1 bytes of path.
func readBounded(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxWorkersFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
