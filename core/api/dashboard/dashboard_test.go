package dashboard

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/internal/apitest"
)

// TestSharedSnapshot: viewers of the live stream share one overview per
// streamMinInterval, however many ask at once; an older one is rebuilt.
func TestSharedSnapshot(t *testing.T) {
	var c sharedSnapshot
	var builds atomic.Int32
	build := func() []byte { return fmt.Appendf(nil, `{"n":%d}`, builds.Add(1)) }
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := string(c.get(build)); got != `{"n":1}` {
				t.Errorf("viewer got %s, want the first snapshot", got)
			}
		}()
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d snapshots built for 64 viewers at once, want 1", n)
	}
	c.mu.Lock()
	c.at = c.at.Add(-streamMinInterval - time.Millisecond)
	c.mu.Unlock()
	if got := string(c.get(build)); got != `{"n":2}` {
		t.Fatalf("after the interval got %s, want a new snapshot", got)
	}
}

// TestRoutesDocumented: each of the dashboard's routes is documented (the
// host's OpenAPI document is built from these); only cancelling needs the
// admin token.
func TestRoutesDocumented(t *testing.T) {
	apitest.CheckRoutes(t, Routes(Deps{})(nil), 5, "ui_", func(rt api.Route) api.Level {
		if rt.Name == "ui_cancel" {
			return api.AdminLevel
		}
		return api.UserLevel
	})
}
