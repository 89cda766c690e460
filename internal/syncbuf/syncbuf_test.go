package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrent: writers and readers at once (run with -race), and
// every write kept whole.
func TestConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("ab"))
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				_ = b.String()
				_ = b.Bytes()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 400) {
		t.Fatalf("%d bytes, want 800 of ab", len(got))
	}
	c := b.Bytes()
	c[0] = 'x'
	if b.String()[0] != 'a' {
		t.Fatal("Bytes is not a copy")
	}
}
