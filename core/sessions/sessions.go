// Package sessions runs a rollout whose agent drives the policy through
// the LLM gateway: an agent outside the host (a trainer's own loop), or a
// harness the host starts in the rollout's sandbox. A Slot is one
// rollout's session: live once its run stage attaches it to the gateway,
// closed by the agent (with a reward, or for its domain to score) or when
// the harness exits; its traces become the rollout's trajectory.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/trajectory"
)

// Close is how an agent outside the host ends its session: with the reward
// it computed, or asking the task's domain to score it.
type Close struct {
	// Reward, when set, is the result's reward; the domain does not score.
	Reward   *float64
	Resolved bool
	// FinalResponse is what the domain scores (default: the text of the
	// last reply the session generated).
	FinalResponse string
	// Metrics are added to the result's.
	Metrics map[string]float64
}

// ErrClosed is a second close of a session.
var ErrClosed = errors.New("the session is already closed")

// Slot is one rollout's session, from submission (the agent may close it
// before it is live) to its end.
type Slot struct {
	mu      sync.Mutex
	session *session.Session
	close   *Close
	live    chan struct{}
}

// NewSlot is a session not yet live.
func NewSlot() *Slot { return &Slot{live: make(chan struct{})} }

// Live is closed when the session is live; wait on it together with the
// rollout's end (a rollout may end before its session starts).
func (s *Slot) Live() <-chan struct{} { return s.live }

// Close ends the session (at once if live, else as soon as it is).
func (s *Slot) Close(c Close) error {
	s.mu.Lock()
	if s.close != nil {
		s.mu.Unlock()
		return ErrClosed
	}
	s.close = &c
	sess := s.session
	s.mu.Unlock()
	if sess != nil {
		sess.Close()
	}
	return nil
}

// AgentRun is an agent the host runs for the session (a harness in the
// rollout's sandbox): the session closes when it returns; its metrics join
// the result's.
type AgentRun func(context.Context) (map[string]float64, error)

// Outcome is a session's end: what it produced and how it was closed.
type Outcome struct {
	*session.Outcome
	// Close is how the agent closed it (nil: the run ended it).
	Close *Close
}

// Run attaches a session of cfg to gw and holds it live until it is
// closed, ctx ends or run (when not nil) returns. The outcome is kept
// either way; the error is ctx's, or run's.
func (s *Slot) Run(ctx context.Context, gw *gateway.Gateway, cfg session.Config, run AgentRun, harness string) (*Outcome, error) {
	sess := session.NewSession(cfg)
	s.mu.Lock()
	s.session = sess
	closed := s.close != nil
	s.mu.Unlock()
	gw.Attach(sess)
	close(s.live)
	if closed {
		sess.Close()
	}
	var agentMetrics map[string]float64
	agentErr := make(chan error, 1)
	if run != nil {
		go func() {
			m, err := run(ctx)
			s.mu.Lock()
			agentMetrics = m
			if s.close == nil {
				s.close = &Close{} // the domain scores what the harness left
			}
			s.mu.Unlock()
			agentErr <- err
			sess.Close()
		}()
	}
	var err error
	select {
	case <-sess.Done():
	case <-ctx.Done():
		err = ctx.Err()
	}
	sess.Close()
	if run != nil {
		if aerr := <-agentErr; err == nil {
			err = aerr
		}
	}
	o := sess.Outcome()
	s.mu.Lock()
	for k, v := range agentMetrics {
		o.Metrics[k] = v
	}
	c := s.close
	s.mu.Unlock()
	if run != nil && err == nil && o.Metrics["gateway_calls"] == 0 && o.Metrics["harness_exit_code"] != 0 {
		err = &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("harness %s exited with code %v without calling the policy (the host's log has its output)",
			harness, o.Metrics["harness_exit_code"])}
	}
	return &Outcome{Outcome: o, Close: c}, err
}

// MaxAuxRequests is a session's budget of calls that generate nothing:
// [gateway] max_requests_per_session, or 32 plus 4 a turn.
func MaxAuxRequests(configured, turns int) int {
	if configured > 0 {
		return configured
	}
	return 32 + 4*turns
}
