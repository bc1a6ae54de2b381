// Package kvwire is the shared vocabulary of kvselect's KV-cache model: who holds blocks (Owner)
// and where (Tier). It is a leaf: it imports only the standard library, so that the engine
// (core/engine and its radix and load packages), the transports (bus, bus/kvevents) and the
// recovery format all name these concepts with one type and never convert between copies.
//
// Wire spellings that differ per protocol (vLLM's "GPU"/"CPU_PINNED" media, the recovery
// format's "device"/"host_pinned" tiers) stay with their decoders; Tier.String and ParseTier are
// kvselect's own canonical names (/dump, recovery).
package kvwire
