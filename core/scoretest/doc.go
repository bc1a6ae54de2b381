// Package scoretest is a conformance harness for custom Scorers and Pickers (see
// engine.Scoring). Run it from an implementation's tests:
//
//	func TestZoneScorer(t *testing.T) { scoretest.Scorer(t, myScorer) }
//	func TestMyPicker(t *testing.T)  { scoretest.Picker(t, myPicker) }
//
// It checks the contract the engine relies on:
//   - determinism: the same arguments give the same score (pickers: the same choice for the same
//     random seed);
//   - finite results: no NaN or ±Inf scores;
//   - no mutation: the context, the candidate and its worker view are unchanged by the call;
//   - no retained buffers: scribbling over the arguments after a call does not change the
//     results of later calls on fresh arguments;
//   - order independence: scoring candidates in any order gives each the same score, and a
//     picker given a permutation of distinct-cost candidates picks the same candidate;
//   - race freedom: concurrent calls on private arguments (run the tests with -race);
//   - allocations: reported (t.Log) per call; the built-in scorers allocate nothing.
//
// Inputs are generated from a fixed seed, so failures reproduce.
package scoretest
