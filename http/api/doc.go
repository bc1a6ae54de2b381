// Package api serves kvselect over HTTP: every route of Dynamo's standalone selection service
// (python -m dynamo.select_service), with the same paths, fields, status codes and
// {"error": ...} bodies, plus kvselect's own additions (replica membership, metrics) and the
// AIBrix decision endpoint when one is configured.
//
// The package is a thin adapter: handlers decode JSON, call one core.Service method and encode
// the result. Errors are mapped to status codes in one table (errors.go); JSON decoding failures
// follow axum's conventions (malformed JSON 400, wrong types or missing fields 422, wrong content
// type 415, oversized body 413). HEAD is served wherever GET is, with GET's headers and no body.
//
// # Request decoding
//
// Request bodies are decoded by github.com/go-json-experiment/json (encoding/json/v2's code)
// straight into the request structs (jsondecode.go), with a custom unmarshaler only for the hot
// token-id and hash arrays (jsonarrays.go) and serde_json's error texts made in one place
// (jsonerror.go). Its defaults give serde's field rules, which Dynamo's clients rely on:
//
//   - field names match exactly: {"Worker_ID": 1} does not set worker_id (encoding/json would
//     match it case-insensitively); keys are unescaped before matching;
//   - a field given twice is 422 "duplicate field `x`", in the body or any nested struct
//     (encoding/json keeps the last one); unknown fields are ignored, repeated or not, and so
//     are repeated keys of map-typed fields (the last wins, as in serde's HashMap);
//   - a body whose first value is not an object is 422, a bare null included.
//
// Everything else follows encoding/json, which the tests use as the reference (jsonref_test.go:
// encoding/json behind a pre-pass enforcing the two rules above): the order in which errors win
// (the syntax of the whole first value, then data errors, then trailing data), nil versus empty
// slices and maps, integer literals only for integer fields ("1.0" is 422), float ranges by
// strconv.ParseFloat, and the handful of places where encoding/json is more lenient than serde:
//
//   - null for a non-pointer field (advisory) or inside an array or map is the zero value,
//     where serde would reject it;
//   - invalid UTF-8 and lone surrogate escapes in strings become U+FFFD, where serde_json
//     rejects the body (400);
//   - nesting is limited to 10000 levels (serde_json: 128).
//
// Error texts keep axum's prefixes ("Failed to parse the request body as JSON: ..." for 400,
// "Failed to deserialize the JSON body into the target type: ..." for 422) followed by a
// serde_json-style message with the field path and "at line L column C".
//
// # Response encoding
//
// The answers of /select, /select_and_reserve and /reservations, and the {"status":"ok"} body,
// are written by appenders into pooled buffers; their bytes are identical to encoding/json's
// (checked on random responses). Other answers use encoding/json.
//
// # Concurrency and ownership
//
// Handlers hold no state of their own beyond the core.Service they wrap; any number run
// concurrently.
// Request-body buffers and response buffers are pooled per request: a decoded request
// never aliases its body (every string is copied out), and a response buffer is returned to its
// pool only after http.ResponseWriter.Write, which does not retain it, has returned.
package api
