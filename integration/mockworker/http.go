package mockworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// maxBodyBytes bounds a request body for a worker whose prompts are limited to maxTokens
// tokens: 11 bytes per token ("4294967295,") plus room for the other fields.
func maxBodyBytes(maxTokens int) int64 { return int64(maxTokens)*11 + 64<<10 }

// wireRequest is the JSON body of POST /v1/completions. prompt_token_ids is this mock's field;
// "prompt" is accepted too when it is an array of token ids (the OpenAI completions form);
// every other field (model, temperature, ...) is ignored.
type wireRequest struct {
	PromptTokenIDs []uint32        `json:"prompt_token_ids"`
	Prompt         json.RawMessage `json:"prompt"`
	MaxTokens      *int            `json:"max_tokens"`
	DPRank         *int            `json:"dp_rank"`
}

// DecodeRequest parses a POST /v1/completions body. It accepts
// {"prompt_token_ids": [...], "max_tokens": N, "dp_rank": R} where only the prompt is
// required, or the prompt as "prompt": [...]; unknown fields are ignored. It checks shape
// only (Serve checks limits). Errors wrap ErrBadRequest.
func DecodeRequest(body []byte) (Request, error) {
	var wr wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&wr); err != nil {
		return Request{}, fmt.Errorf("%w: invalid JSON body: %w", ErrBadRequest, err)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("%w: trailing data after the JSON body", ErrBadRequest)
	}
	req := Request{PromptTokenIDs: wr.PromptTokenIDs, MaxTokens: wr.MaxTokens, DPRank: wr.DPRank}
	if len(req.PromptTokenIDs) == 0 && len(wr.Prompt) > 0 && !bytes.Equal(wr.Prompt, []byte("null")) {
		if err := json.Unmarshal(wr.Prompt, &req.PromptTokenIDs); err != nil {
			return Request{}, fmt.Errorf("%w: prompt must be an array of token ids (this mock has no tokenizer): %w", ErrBadRequest, err)
		}
	}
	if len(req.PromptTokenIDs) == 0 {
		return Request{}, fmt.Errorf("%w: prompt_token_ids is required and must not be empty", ErrBadRequest)
	}
	return req, nil
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error string `json:"error"`
}

// Handler returns the worker's HTTP API:
//
//	POST /v1/completions   serve a request (see DecodeRequest); 200 with a Result
//	GET  /health           200 {"status":"ok"}, 503 once closed
//	GET  /stats            200 with []RankStats
//	POST /admin/reset      Reset; 204, or 409 while requests hold blocks
//	POST /admin/restart    Restart; 204
//
// Malformed requests get 400, oversized bodies 413, a closed worker 503; other methods on
// these paths get 405. Every error body is {"error": "..."}. Completions take the simulated
// time (scaled by Speedup) before answering; a client that goes away abandons its request.
func (w *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", w.handleCompletion)
	mux.HandleFunc("GET /health", func(rw http.ResponseWriter, _ *http.Request) {
		if w.isClosed() {
			writeJSON(rw, w.log, http.StatusServiceUnavailable, errorBody{Error: ErrClosed.Error()})
			return
		}
		writeJSON(rw, w.log, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /stats", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, w.log, http.StatusOK, w.Stats())
	})
	mux.HandleFunc("POST /admin/reset", func(rw http.ResponseWriter, _ *http.Request) {
		w.writeResult(rw, w.Reset())
	})
	mux.HandleFunc("POST /admin/restart", func(rw http.ResponseWriter, _ *http.Request) {
		w.writeResult(rw, w.Restart())
	})
	return mux
}

func (w *Worker) handleCompletion(rw http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, hr.Body, maxBodyBytes(w.cfg.MaxPromptTokens)))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(rw, w.log, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body exceeds %d bytes", tooBig.Limit)})
			return
		}
		writeJSON(rw, w.log, http.StatusBadRequest, errorBody{Error: "reading body: " + err.Error()})
		return
	}
	req, err := DecodeRequest(body)
	if err != nil {
		writeJSON(rw, w.log, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	res, err := w.Serve(hr.Context(), req)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return // the client is gone
		}
		writeJSON(rw, w.log, statusOf(err), errorBody{Error: err.Error()})
		return
	}
	writeJSON(rw, w.log, http.StatusOK, res)
}

// writeResult answers an admin call: 204 on success, the mapped status otherwise.
func (w *Worker) writeResult(rw http.ResponseWriter, err error) {
	if err != nil {
		writeJSON(rw, w.log, statusOf(err), errorBody{Error: err.Error()})
		return
	}
	rw.WriteHeader(http.StatusNoContent)
}

// statusOf maps the package's sentinel errors to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrBusy):
		return http.StatusConflict
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(rw http.ResponseWriter, log *slog.Logger, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		log.Error("mockworker: encoding response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_, _ = rw.Write(append(b, '\n'))
}
