package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrInjected is a start failed on purpose ([sandbox] fault_start_rate).
var ErrInjected = errors.New("sandbox start failed on purpose")

// Reserved is a sandbox id handed out at init and started on first use:
// many rollouts never call a tool that needs one, and an unused sandbox
// should cost nothing.
type Reserved struct {
	ID    string
	m     *Manager
	owner string
	spec  Spec
	// start is held (one token) while the sandbox starts: concurrent
	// callers wait for that start, each no longer than its own context,
	// and Release for it to end before it stops the sandbox.
	start chan struct{}
	sb    *Sandbox
	err   error // a start's final failure, given to every later caller
	mu    sync.Mutex
	done  bool
}

// Reserve hands out a sandbox id without starting anything.
func (m *Manager) Reserve(owner string, spec Spec) *Reserved {
	r := &Reserved{ID: "rs-" + randHex(8), m: m, owner: owner, spec: spec, start: make(chan struct{}, 1)}
	m.mu.Lock()
	m.reserved[r.ID] = r
	m.mu.Unlock()
	return r
}

// Sandbox starts the sandbox the first time it is needed. A start that
// ended because its caller left (its context, say a plugin call cut by
// the plugin's crash) is not the sandbox's failure: the next caller
// starts it again.
func (r *Reserved) Sandbox(ctx context.Context) (*Sandbox, error) {
	select {
	case r.start <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.start }()
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	switch {
	case r.sb != nil:
		return r.sb, nil
	case r.err != nil:
		return nil, r.err
	case done:
		return nil, ErrStopped
	}
	if f := r.m.cfg.FaultStartRate; f > 0 && rand.Float64() < f {
		r.mu.Lock()
		r.err = fmt.Errorf("%w ([sandbox] fault_start_rate %g)", ErrInjected, f)
		r.mu.Unlock()
		r.m.log.Warn("sandbox start failed on purpose", "rollout", r.owner, "fault_start_rate", f)
		return nil, r.err
	}
	sb, err := r.m.startRetrying(ctx, r.owner, r.spec)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sb, r.err = sb, err
	r.mu.Unlock()
	return sb, err
}

// Started reports whether the sandbox was ever started.
func (r *Reserved) Started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sb != nil
}

// Release stops the sandbox if it started and forgets the reservation.
func (r *Reserved) Release() error {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.start <- struct{}{} // a start under way ends first; none begins after this
	sb := r.sb
	<-r.start
	r.m.mu.Lock()
	delete(r.m.reserved, r.ID)
	r.m.mu.Unlock()
	if sb != nil {
		return r.m.Stop(sb.ID)
	}
	return nil
}

// Lookup finds a sandbox by reservation or sandbox id, starting it if reserved.
func (m *Manager) Lookup(ctx context.Context, id string) (*Sandbox, error) {
	m.mu.Lock()
	r, reserved := m.reserved[id]
	m.mu.Unlock()
	if reserved {
		return r.Sandbox(ctx)
	}
	return m.Get(id)
}

// startAttempts and startBackoff: a start that fails (a node briefly out of
// something) is tried again before the rollout fails with sandbox_failed.
const (
	startAttempts = 3
	startBackoff  = 200 * time.Millisecond
)

func (m *Manager) startRetrying(ctx context.Context, owner string, spec Spec) (*Sandbox, error) {
	wait := startBackoff
	var err error
	for try := 1; try <= startAttempts; try++ {
		var s *Sandbox
		if s, err = m.Start(ctx, owner, spec); err == nil {
			return s, nil
		}
		if ctx.Err() != nil || try == startAttempts {
			break
		}
		m.log.Warn("sandbox start failed; retrying", "rollout", owner, "attempt", try, "error", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait *= 2
	}
	return nil, fmt.Errorf("sandbox did not start after %d attempts: %w", startAttempts, err)
}
