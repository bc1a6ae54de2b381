package core

// The catalog side of Service: worker registration and listing. Writers take catMu before mu
// (Service's lock order), so that an engine update and its listener reconciliation are one step.

// UpsertWorker registers or replaces a worker (POST /workers).
func (s *Service) UpsertWorker(spec WorkerSpec) (WorkerRecord, error) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	if err := s.fileOwnedLocked(spec.WorkerID); err != nil {
		return WorkerRecord{}, err
	}
	rec, err := s.upsertCatLocked(spec)
	if err == nil {
		rec = s.withListeners(rec)
	}
	return rec, err
}

// PatchWorker updates supplied fields of a worker (PATCH /workers/{id}).
func (s *Service) PatchWorker(id uint64, patch WorkerPatch) (WorkerRecord, error) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	if err := s.fileOwnedLocked(&id); err != nil {
		return WorkerRecord{}, err
	}
	s.mu.Lock()
	rec, err := s.eng.PatchWorker(id, patch)
	s.flushLocked()
	s.drainLocked()
	s.mu.Unlock()
	if err == nil {
		s.reconcileListeners(id)
		rec = s.withListeners(rec)
	}
	return rec, err
}

// DeleteWorker removes a worker (DELETE /workers/{id}).
func (s *Service) DeleteWorker(id uint64) (WorkerRecord, error) {
	s.catMu.Lock()
	defer s.catMu.Unlock()
	if err := s.fileOwnedLocked(&id); err != nil {
		return WorkerRecord{}, err
	}
	return s.deleteCatLocked(id)
}

// Workers lists catalog records (GET /workers); empty filters match all.
func (s *Service) Workers(model, group string) []WorkerRecord {
	s.mu.Lock()
	recs := s.eng.Workers(model, group)
	s.mu.Unlock()
	for i := range recs {
		recs[i] = s.withListeners(recs[i])
	}
	return recs
}
