package api

// CompareDecoders exposes the strict-decoder-versus-reference check (jsonref_test.go) to the
// external test package's fuzz target. It returns nil when every request table agrees with the
// reference on body.
var CompareDecoders = compareAll
