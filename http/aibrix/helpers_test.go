package aibrix

import "crypto/rand"

// cryptoReader reads from crypto/rand without importing it in every test.
type cryptoReader struct{}

func (cryptoReader) Read(p []byte) (int, error) { return rand.Read(p) }
