package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/kvselect/kvselect/core"
)

func (h *handlers) upsertWorker(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var spec core.WorkerSpec
	if err := decodeJSON(w, r, &spec); err != nil {
		writeError(w, err)
		return
	}
	rec, err := h.svc.UpsertWorker(spec)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, rec)
}

func (h *handlers) patchWorker(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, err := workerID(ps)
	if err != nil {
		writeError(w, err)
		return
	}
	var patch core.WorkerPatch
	if err := decodeJSON(w, r, &patch); err != nil {
		writeError(w, err)
		return
	}
	rec, err := h.svc.PatchWorker(id, patch)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (h *handlers) deleteWorker(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	id, err := workerID(ps)
	if err != nil {
		writeError(w, err)
		return
	}
	rec, err := h.svc.DeleteWorker(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (h *handlers) listWorkers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	writeJSON(w, http.StatusOK, h.svc.Workers(q.Get("model_name"), q.Get("routing_group")))
}

func (h *handlers) health(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeRaw(w, http.StatusOK, okBytes)
}

func (h *handlers) ready(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	rd := h.svc.Ready()
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, rd)
}

// workerID parses the {worker_id} path segment as a u64 (400 otherwise, like axum's Path).
func workerID(ps httprouter.Params) (uint64, error) {
	s := param(ps, "worker_id")
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &httpError{errInvalidPath, fmt.Sprintf("Invalid URL: Cannot parse `%s` to a `u64`", s)}
	}
	return id, nil
}
