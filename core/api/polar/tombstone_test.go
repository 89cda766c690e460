package polar

import (
	"testing"
	"time"
)

// TestTombstonesSweptByTime: Polar's cancel markers go when they expire,
// with no other request to sweep them; past the cap a new one is refused
// with the wait until the oldest goes.
func TestTombstonesSweptByTime(t *testing.T) {
	oldTTL, oldMax := tombstoneTTL, maxTombstones
	tombstoneTTL, maxTombstones = 150*time.Millisecond, 2
	defer func() { tombstoneTTL, maxTombstones = oldTTL, oldMax }()
	pt := newPolarTasks()
	now := time.Now()
	for _, id := range []string{"a", "b"} {
		if _, ok := pt.tombstone(id, now); !ok {
			t.Fatalf("%s refused", id)
		}
	}
	if wait, ok := pt.tombstone("c", now); ok || wait <= 0 || wait > tombstoneTTL {
		t.Fatalf("past the cap: ok=%v wait=%v", ok, wait)
	}
	if _, ok := pt.tombstone("a", now); !ok {
		t.Fatal("renewing a held marker was refused")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pt.mu.Lock()
		n, sweeping := len(pt.tombstones), pt.sweeper != nil
		pt.mu.Unlock()
		if n == 0 && !sweeping {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d markers left, sweeper running %v", n, sweeping)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := pt.tombstone("d", time.Now()); !ok {
		t.Fatal("a new marker after the sweep was refused")
	}
}
