// Package logbuf is a goroutine-safe byte buffer for tests that capture what a server or a
// child process writes (slog handlers, os/exec output) while it runs and read it meanwhile.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer whose methods may be called from several goroutines. The zero value
// is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p (io.Writer).
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many non-overlapping times s occurs in what was written so far.
func (l *Buffer) Count(s string) int { return strings.Count(l.String(), s) }
