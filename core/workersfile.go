package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/kvselect/kvselect/core/engine"
)

// The workers file (--workers-file) is a discovery source for the catalog: a YAML or JSON list of
// worker records with the fields of POST /workers. Each version of the file is one snapshot,
// applied by ApplyWorkerSnapshot.
//
// Coexistence with the API (the rule): the file owns exactly the worker ids it lists. POST,
// PATCH and DELETE /workers on a file-owned id are refused with 409 Conflict (ErrFileOwned), so
// the catalog never silently disagrees with the file. Workers registered through the API under
// ids the file does not list are never touched by a snapshot. A snapshot that lists an id that
// was registered through the API takes it over (replaces the record); removing an id from the
// file deletes that worker and releases the id to the API.

// Workers-file bounds.
const (
	// MaxWorkersFileBytes bounds the file read per snapshot.
	MaxWorkersFileBytes = 16 << 20
	// MaxWorkersFileRecords bounds the records of one snapshot.
	MaxWorkersFileRecords = 65536
)

// ErrWorkersFile wraps every reason a workers file does not parse.
var ErrWorkersFile = errors.New("invalid workers file")

// errFileOwned is returned by API writes to a worker id the workers file owns.
func errFileOwned(id uint64) error {
	return &engine.Error{Kind: engine.ErrConflict, Msg: fmt.Sprintf("worker %d is managed by the workers file; edit the file instead", id)}
}

// ParseWorkersFile decodes a workers file: a YAML (or JSON, which is YAML) sequence of worker
// records. Unknown fields, a missing or duplicate worker_id, an empty document (write [] for
// an empty catalog), more than one YAML document, more than MaxWorkersFileBytes or MaxWorkersFileRecords are errors wrapping
// ErrWorkersFile. Field values are validated when the snapshot is applied, as for POST /workers.
func ParseWorkersFile(data []byte) ([]WorkerSpec, error) {
	if len(data) > MaxWorkersFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrWorkersFile, MaxWorkersFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty (write [] for an empty catalog)", ErrWorkersFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var top any
	if err := dec.Decode(&top); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty (write [] for an empty catalog)", ErrWorkersFile)
		}
		return nil, fmt.Errorf("%w: %v", ErrWorkersFile, err)
	}
	// A further document ("---") would otherwise be dropped without a word, and with it every
	// worker it lists: a concatenation of two files must not quietly halve the catalog. Empty
	// trailing documents (a final "---") hold nothing and are allowed.
	for {
		var more any
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || more != nil {
			return nil, fmt.Errorf("%w: more than one YAML document (merge them into one list)", ErrWorkersFile)
		}
	}
	doc, ok := top.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: the document must be a list of worker records", ErrWorkersFile)
	}
	if len(doc) > MaxWorkersFileRecords {
		return nil, fmt.Errorf("%w: more than %d records", ErrWorkersFile, MaxWorkersFileRecords)
	}
	specs := make([]WorkerSpec, len(doc))
	seen := make(map[uint64]int, len(doc))
	for i, rec := range doc {
		if _, ok := rec.(map[string]any); !ok {
			return nil, fmt.Errorf("%w: record %d is not a mapping", ErrWorkersFile, i+1)
		}
		// YAML's value model round-trips through JSON, so the record is decoded exactly as a
		// POST /workers body (plus strictness about unknown fields).
		j, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrWorkersFile, i+1, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&specs[i]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrWorkersFile, i+1, err)
		}
		id := specs[i].WorkerID
		if id == nil {
			return nil, fmt.Errorf("%w: record %d: missing worker_id", ErrWorkersFile, i+1)
		}
		if j, dup := seen[*id]; dup {
			return nil, fmt.Errorf("%w: records %d and %d both have worker_id %d", ErrWorkersFile, j, i+1, *id)
		}
		seen[*id] = i + 1
	}
	return specs, nil
}

// WorkersFileStatus describes the workers-file source (GET /status, metrics).
type WorkersFileStatus struct {
	Path             string `json:"path"`
	OwnedWorkers     int    `json:"owned_workers"`
	SnapshotsApplied uint64 `json:"snapshots_applied"`
	ApplyFailures    uint64 `json:"apply_failures"`
	ParseErrors      uint64 `json:"parse_errors"`
	LastError        string `json:"last_error,omitempty"`
	// Last is what the latest apply did, record by record.
	Last SnapshotResult `json:"last_snapshot"`
}

// SnapshotResult counts what one snapshot apply did.
type SnapshotResult struct {
	Upserted  int `json:"upserted"`
	Deleted   int `json:"deleted"`
	Unchanged int `json:"unchanged"`
	Failed    int `json:"failed"`
}

// workersFile is the service's workers-file state. owned (id → fingerprint of the applied
// spec, "" when its apply failed) is guarded by Service.catMu, so ownership checks and snapshot
// applies are serialised with every catalog change; the status counters have their own lock so a
// scrape never waits for a catalog change.
type workersFile struct {
	owned map[uint64]string

	mu     sync.Mutex
	status WorkersFileStatus
}

// enableWorkersFile turns on ownership tracking (idempotent).
func (s *Service) enableWorkersFile(path string) *workersFile {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	if s.wf == nil {
		s.wf = &workersFile{owned: map[uint64]string{}, status: WorkersFileStatus{Path: path}}
	}
	return s.wf
}

// WorkersFileStatus reports the workers-file source; nil when none is configured.
func (s *Service) WorkersFileStatus() *WorkersFileStatus {
	s.catMu.Lock()
	wf := s.wf
	n := 0
	if wf != nil {
		n = len(wf.owned)
	}
	s.catMu.Unlock()
	if wf == nil {
		return nil
	}
	wf.mu.Lock()
	st := wf.status
	wf.mu.Unlock()
	st.OwnedWorkers = n
	return &st
}

func (wf *workersFile) note(f func(st *WorkersFileStatus)) {
	wf.mu.Lock()
	f(&wf.status)
	wf.mu.Unlock()
}

// fileOwnedLocked refuses an API write to a file-owned id. Called with catMu held.
func (s *Service) fileOwnedLocked(id *uint64) error {
	if s.wf == nil || id == nil {
		return nil
	}
	if _, ok := s.wf.owned[*id]; ok {
		return errFileOwned(*id)
	}
	return nil
}

// ApplyWorkerSnapshot reconciles the catalog with one workers-file snapshot, atomically with
// respect to other catalog changes: ids the file owned but no longer lists are deleted, records
// that differ from what was last applied are upserted, and records that did not change are left
// alone (their KV listeners and sequence watermarks untouched). Every record is attempted; the
// error joins the failures, and a failed record stays file-owned so that a retry applies it.
func (s *Service) ApplyWorkerSnapshot(specs []WorkerSpec) error {
	wf := s.enableWorkersFile("")
	var res SnapshotResult
	defer func() { wf.note(func(st *WorkersFileStatus) { st.Last = res }) }()
	s.catMu.Lock()
	defer s.catMu.Unlock()
	want := make(map[uint64]struct{}, len(specs))
	for i := range specs {
		want[*specs[i].WorkerID] = struct{}{}
	}
	var errs []error
	gone := make([]uint64, 0)
	for id := range wf.owned {
		if _, ok := want[id]; !ok {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		if _, err := s.deleteCatLocked(id); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete worker %d: %w", id, err))
			res.Failed++
			continue
		}
		delete(wf.owned, id)
		res.Deleted++
	}
	for i := range specs {
		id := *specs[i].WorkerID
		fp, err := json.Marshal(&specs[i]) // encoding/json sorts map keys: a stable fingerprint
		if err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", id, err))
			res.Failed++
			continue
		}
		if prev, ok := wf.owned[id]; ok && prev == string(fp) && s.hasWorker(id) {
			res.Unchanged++
			continue
		}
		if _, err := s.upsertCatLocked(specs[i]); err != nil {
			wf.owned[id] = ""
			errs = append(errs, fmt.Errorf("worker %d: %w", id, err))
			res.Failed++
			continue
		}
		wf.owned[id] = string(fp)
		res.Upserted++
	}
	return errors.Join(errs...)
}

// hasWorker reports whether id is in the catalog.
func (s *Service) hasWorker(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.eng.Worker(id)
	return ok
}

// upsertCatLocked is UpsertWorker without the ownership check; catMu is held.
func (s *Service) upsertCatLocked(spec WorkerSpec) (WorkerRecord, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return WorkerRecord{}, errShuttingDown
	}
	rec, err := s.eng.UpsertWorker(spec)
	s.flushLocked()
	s.drainLocked()
	s.mu.Unlock()
	if err == nil {
		s.reconcileListeners(rec.WorkerID)
	}
	return rec, err
}

// deleteCatLocked is DeleteWorker without the ownership check; catMu is held.
func (s *Service) deleteCatLocked(id uint64) (WorkerRecord, error) {
	s.mu.Lock()
	rec, err := s.eng.DeleteWorker(id)
	s.flushLocked()
	s.drainLocked()
	s.mu.Unlock()
	if err == nil {
		s.reconcileListeners(id)
	}
	return rec, err
}
