package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/policy"
)

// blockingAborter is a backend whose abort returns when released.
type blockingAborter struct {
	engine.Client
	started, release chan struct{}
}

func (a *blockingAborter) AbortInFlight(context.Context) error {
	close(a.started)
	<-a.release
	return nil
}

// TestPauseWaitsForEvacuation: an evacuation's abort ends with a resume of
// its backend, so a policy pause waits for it to finish (else the resume
// would undo the pause); and no evacuation starts while paused.
func TestPauseWaitsForEvacuation(t *testing.T) {
	f := newFixture(t, nil, nil)
	a := &blockingAborter{started: make(chan struct{}), release: make(chan struct{})}
	b := &backend.Backend{ID: "b1", Client: a}
	evacuated := make(chan error, 1)
	go func() { evacuated <- f.p.gate.Evacuate(context.Background(), b) }()
	<-a.started
	paused := make(chan error, 1)
	go func() {
		_, err := f.p.Pause(context.Background(), false)
		paused <- err
	}()
	select {
	case err := <-paused:
		t.Fatalf("the pause returned (%v) during an evacuation", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(a.release)
	if err := <-evacuated; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-paused:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pause never returned")
	}
	if err := f.p.gate.Evacuate(context.Background(), b); !errors.Is(err, policy.ErrPaused) {
		t.Fatalf("evacuation while paused: %v", err)
	}
	f.p.Resume(context.Background(), 1)
}
