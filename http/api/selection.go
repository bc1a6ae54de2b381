package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/kvselect/kvselect/core"
)

// policyClassHeader selects a router-queue policy class (trimmed; empty ignored).
const policyClassHeader = "x-dynamo-meta-policy-class"

// policyClassKey is policyClassHeader in net/http's canonical form, computed once: Header.Get
// would canonicalise the lower-case name, allocating, on every request.
var policyClassKey = http.CanonicalHeaderKey(policyClassHeader)

func (h *handlers) decodeSelect(w http.ResponseWriter, r *http.Request) (*core.SelectRequest, bool) {
	var req core.SelectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return nil, false
	}
	if v := r.Header[policyClassKey]; len(v) > 0 {
		req.PolicyClass = strings.TrimSpace(v[0])
	}
	return &req, true
}

func (h *handlers) selectWorker(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	req, ok := h.decodeSelect(w, r)
	if !ok {
		return
	}
	resp, err := h.svc.SelectWait(r.Context(), req)
	if err != nil {
		writeSelectError(w, r, err)
		return
	}
	writeSelectResponse(w, http.StatusOK, resp)
}

func (h *handlers) selectAndReserve(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	req, ok := h.decodeSelect(w, r)
	if !ok {
		return
	}
	req.Advisory = false // select_and_reserve always books
	resp, err := h.svc.SelectAndReserveWait(r.Context(), req)
	if err != nil {
		writeSelectError(w, r, err)
		return
	}
	writeSelectResponse(w, http.StatusOK, resp)
}

// writeSelectError answers a failed selection, unless the request's context ended while it
// waited in the router queue: the client is gone and there is no one to answer.
func writeSelectError(w http.ResponseWriter, r *http.Request, err error) {
	if ctxErr := r.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return
	}
	writeError(w, err)
}

func (h *handlers) reserve(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var req core.ReservationRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	resp, err := h.svc.Reserve(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeReservationResponse(w, http.StatusCreated, resp)
}

func (h *handlers) prefillComplete(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	if err := h.svc.PrefillComplete(param(ps, "id")); err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, http.StatusOK, okBytes)
}

// outputBlockRequest is the body of POST /reservations/{id}/output_block ({} is fine).
type outputBlockRequest struct {
	DecayFraction *float64 `json:"decay_fraction"`
}

func (h *handlers) outputBlock(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var req outputBlockRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := h.svc.OutputBlock(param(ps, "id"), req.DecayFraction); err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, http.StatusOK, okBytes)
}

func (h *handlers) free(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	if err := h.svc.Free(param(ps, "id")); err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, http.StatusOK, okBytes)
}
