package api

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kvselect/kvselect/core"
)

func (h *handlers) loads(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	writeJSON(w, http.StatusOK, h.svc.LoadsWithSpeeds(q.Get("model_name"), q.Get("routing_group")))
}

func (h *handlers) potentialLoads(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var q core.PromptQuery
	if err := decodeJSON(w, r, &q); err != nil {
		writeError(w, err)
		return
	}
	out, err := h.svc.PotentialLoads(&q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handlers) overlapScores(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var q core.PromptQuery
	if err := decodeJSON(w, r, &q); err != nil {
		writeError(w, err)
		return
	}
	out, err := h.svc.OverlapScores(&q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// dump streams the index in Dynamo's recovery format. Once streaming has begun a failure can
// only cut the body short; it is logged. HEAD runs it too, so that the headers (Content-Length
// for a dump small enough to be buffered whole) are GET's; net/http drops the body.
func (h *handlers) dump(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	if err := h.svc.Dump(w); err != nil {
		h.log.Warn("dump interrupted", "err", err)
	}
}

// peerRequest is the body of the replica_sync peer routes.
type peerRequest struct {
	Endpoint *string `json:"endpoint"`
}

func (h *handlers) decodePeer(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req peerRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, err)
		return "", false
	}
	if req.Endpoint == nil {
		writeError(w, &httpError{errUnprocessable, "Failed to deserialize the JSON body into the target type: missing field `endpoint`"})
		return "", false
	}
	return *req.Endpoint, true
}

func (h *handlers) registerPeer(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ep, ok := h.decodePeer(w, r)
	if !ok {
		return
	}
	added, err := h.svc.RegisterPeer(ep)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeRaw(w, status, okBytes)
}

func (h *handlers) deregisterPeer(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ep, ok := h.decodePeer(w, r)
	if !ok {
		return
	}
	if err := h.svc.DeregisterPeer(ep); err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, http.StatusOK, okBytes)
}

func (h *handlers) peers(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, h.svc.Peers())
}

func (h *handlers) members(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, h.svc.Members())
}
