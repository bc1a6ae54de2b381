// Package importgraph holds no code: its test pins the layering rules of the module's import
// graph (which packages may link core, nats-server, ...), so a forbidden edge fails CI.
package importgraph
