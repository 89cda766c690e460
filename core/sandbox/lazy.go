package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Reserved is a sandbox id handed out at init and started on first use:
// many rollouts never call a tool that needs one, and an unused sandbox
// should cost nothing.
type Reserved struct {
	ID    string
	m     *Manager
	owner string
	spec  Spec
	once  sync.Once
	sb    *Sandbox
	err   error
	mu    sync.Mutex
	done  bool
}

// Reserve hands out a sandbox id without starting anything.
func (m *Manager) Reserve(owner string, spec Spec) *Reserved {
	r := &Reserved{ID: "rs-" + randHex(8), m: m, owner: owner, spec: spec}
	m.mu.Lock()
	m.reserved[r.ID] = r
	m.mu.Unlock()
	return r
}

// Sandbox starts the sandbox the first time it is needed.
func (r *Reserved) Sandbox(ctx context.Context) (*Sandbox, error) {
	r.once.Do(func() {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		if done {
			r.err = ErrStopped
			return
		}
		r.sb, r.err = r.m.startRetrying(ctx, r.owner, r.spec)
	})
	return r.sb, r.err
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
	r.once.Do(func() { r.err = ErrStopped }) // no start after release
	r.m.mu.Lock()
	delete(r.m.reserved, r.ID)
	r.m.mu.Unlock()
	if r.sb != nil {
		return r.m.Stop(r.sb.ID)
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
