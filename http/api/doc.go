// Package api serves kvselect over HTTP: every route of Dynamo's standalone selection service
// (python -m dynamo.select_service), with the same paths, fields, status codes and
// {"error": ...} bodies, plus kvselect's own additions (replica membership, metrics) and the
// AIBrix decision endpoint when one is configured.
//
// The package is a thin adapter: handlers decode JSON, call one core.Service method and encode
// the result. Errors are mapped to status codes in one table (errors.go); JSON decoding failures
// follow axum's conventions (malformed JSON 400, wrong types or missing fields 422, wrong content
// type 415, oversized body 413).
package api
