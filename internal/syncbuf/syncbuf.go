// Package syncbuf is a byte buffer that one goroutine may write while
// another reads it: a command's stdout and stderr, or a log a test reads
// while the server still writes it.
package syncbuf

import "sync"

// Buffer collects writes under a lock; its zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  []byte
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

// Bytes is a copy of what was written so far.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b...)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
