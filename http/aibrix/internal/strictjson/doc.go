// Package strictjson is a small, allocation-conscious JSON parser that enforces
// the rules the AIBrix external-routing protocol places on both directions of
// the exchange and that encoding/json does not: duplicate object members are
// rejected (names compared after unescaping, case-sensitively), exactly one
// value may appear in the input (trailing values are rejected, trailing
// whitespace is allowed), strings must be valid UTF-8 without lone surrogate
// escapes, and nesting is bounded so hostile input cannot exhaust the stack.
//
// The parser builds a flat tree ([Doc]) whose nodes live in one slice and are
// linked by index; callers walk it with [Value] handles. Numbers are kept as
// their literal text so each caller decides how strict its numeric rules are
// ([Value.Int] accepts only integer literals, [Value.Float] any number).
//
// Concurrency: a [Doc] is immutable after [Parse] returns and may be read from
// any number of goroutines. Nothing in this package panics on any input.
package strictjson
