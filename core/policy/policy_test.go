package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/store"
)

// TestPauseResume: a drain pause waits for the request in flight and holds
// new ones until resume, which stamps them with the new version; the
// version and a pause not yet ended are taken up by a new gate on the
// same store (a restarted host).
func TestPauseResume(t *testing.T) {
	st := store.NewMemory(10)
	g := New(Deps{Pool: backend.NewPool(hclog.NewNullLogger()), Store: st})
	g.SetVersion(3)
	ctx := context.Background()
	_, v, slot, err := g.Enter(ctx, "b1")
	if err != nil || v != 3 {
		t.Fatalf("enter: %v %d", err, v)
	}
	paused := make(chan PauseReport, 1)
	go func() {
		rep, err := g.Pause(ctx, false)
		if err != nil {
			t.Error(err)
		}
		paused <- rep
	}()
	for !g.State().Paused {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-paused:
		t.Fatal("a drain pause answered with a request in flight")
	case <-time.After(50 * time.Millisecond):
	}
	entered := make(chan int64, 1)
	go func() {
		_, v, s, err := g.Enter(ctx, "b1")
		if err == nil {
			g.Leave(s)
		}
		entered <- v
	}()
	if cut := g.Leave(slot); cut {
		t.Fatal("a drained request was cut")
	}
	if rep := <-paused; rep.InFlight != 1 || rep.Mode != "drain" {
		t.Fatalf("pause report %+v", rep)
	}
	select {
	case <-entered:
		t.Fatal("a request entered while paused")
	case <-time.After(50 * time.Millisecond):
	}
	// A new gate on the same store: paused at version 3.
	if g2 := New(Deps{Pool: backend.NewPool(hclog.NewNullLogger()), Store: st}); !g2.State().Paused || g2.Version() != 3 {
		t.Fatalf("restarted: %+v", g2.State())
	}
	if rep := g.Resume(ctx, 4); !rep.WasPaused || rep.Version != 4 {
		t.Fatalf("resume %+v", rep)
	}
	if v := <-entered; v != 4 {
		t.Fatalf("held request stamped %d, want 4", v)
	}
	if g2 := New(Deps{Pool: backend.NewPool(hclog.NewNullLogger()), Store: st}); g2.State().Paused || g2.Version() != 4 {
		t.Fatalf("restarted after resume: %+v", g2.State())
	}
}

// TestAbortCutsRequests: an abort pause cuts the requests to backends
// that cannot abort by themselves (none here can), and no evacuation runs
// while paused.
func TestAbortCutsRequests(t *testing.T) {
	g := New(Deps{Pool: backend.NewPool(hclog.NewNullLogger()), Store: store.NewMemory(10)})
	ctx := context.Background()
	gctx, _, slot, err := g.Enter(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	cut := make(chan bool, 1)
	go func() { <-gctx.Done(); cut <- g.Leave(slot) }() // as the request's caller does
	rep, err := g.Pause(ctx, true)
	if err != nil || rep.Aborted != 1 || !<-cut {
		t.Fatalf("abort: %+v %v", rep, err)
	}
	if err := g.Evacuate(ctx, nil); !errors.Is(err, ErrPaused) {
		t.Fatalf("evacuate while paused: %v", err)
	}
	g.Resume(ctx, 1)
}
