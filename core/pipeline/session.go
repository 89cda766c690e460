package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// SessionClose is how an agent outside the host ends its session: with
// the reward it computed, or asking the task's domain to score it.
type SessionClose struct {
	// Reward, when set, is the result's reward; the domain does not score.
	Reward   *float64
	Resolved bool
	// FinalResponse is what the domain scores (default: the text of the
	// last reply the session generated).
	FinalResponse string
	// Metrics are added to the result's.
	Metrics map[string]float64
}

// Errors of CloseSession.
var (
	ErrNoSession     = errors.New("no open session with this id")
	ErrSessionClosed = errors.New("the session is already closed")
)

// Gateway is the host's LLM gateway; the API serves its routes.
func (p *Pipeline) Gateway() *gateway.Gateway { return p.gw }

// CloseSession ends a gateway rollout's session; the rollout goes on to
// eval (or straight to its result with the given reward). A session still
// in init is closed as soon as it starts.
func (p *Pipeline) CloseSession(id string, c SessionClose) error {
	r, ok := p.Lookup(id)
	if !ok || r.Req.Agent != AgentGateway {
		return ErrNoSession
	}
	r.mu.Lock()
	if r.closeReq != nil {
		r.mu.Unlock()
		return ErrSessionClosed
	}
	r.closeReq = &c
	s := r.session
	r.mu.Unlock()
	if s != nil {
		s.Close()
	}
	return nil
}

// runSession is the run stage of a gateway rollout: the session is live
// on the rollout's sticky backend until it is closed, cancelled or timed
// out; its traces are the rollout's trajectory either way.
//
// agentRun, when not nil, is the agent in the rollout's sandbox (a
// harness): the session closes when it returns, and its metrics join the
// result's; its error fails the rollout.
func (p *Pipeline) runSession(ctx context.Context, r *Rollout, fo *failover, model string, agentRun func(context.Context) (map[string]float64, error)) error {
	r.mu.Lock()
	ep := *r.episode
	r.mu.Unlock()
	var tok tokenizer.Tokenizer = fo
	if p.runner.Local != nil {
		tok = p.runner.Local
	}
	lease := fo.lease
	s := gateway.NewSession(gateway.Config{ID: r.ID, Key: r.Req.SessionKey, Model: model, Gen: fo, BackendID: lease.B.ID,
		Tok: tok, Splicer: p.splicer(lease.B), Parser: p.runner.Parser, Policy: p.gate.Version,
		MaxCalls: ep.MaxTurns, MaxTokensPerCall: ep.MaxTokensPerTurn, MaxTotalTokens: ep.MaxTotalTokens,
		MaxConcurrent: p.d.Cfg.Gateway.MaxConcurrentPerSession, MaxRequests: maxAuxRequests(p.d.Cfg.Gateway.MaxRequestsPerSession, ep.MaxTurns),
		Temperature: ep.Temperature, TopP: ep.TopP, TopK: ep.TopK, Seed: ep.Seed, Stop: ep.Stop, TemplateKwargs: ep.TemplateKwargs,
		Log: p.d.Log.Named("gateway")})
	r.mu.Lock()
	r.session = s
	closed := r.closeReq != nil
	r.mu.Unlock()
	p.gw.Attach(s)
	close(r.live)
	if closed {
		s.Close()
	}
	var agentMetrics map[string]float64
	agentErr := make(chan error, 1)
	if agentRun != nil {
		go func() {
			m, err := agentRun(ctx)
			r.mu.Lock()
			agentMetrics = m
			if r.closeReq == nil {
				r.closeReq = &SessionClose{} // the domain scores what the harness left
			}
			r.mu.Unlock()
			agentErr <- err
			s.Close()
		}()
	}
	var err error
	select {
	case <-s.Done():
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	if agentRun != nil {
		if aerr := <-agentErr; err == nil {
			err = aerr
		}
	}
	o := s.Outcome()
	r.mu.Lock()
	for k, v := range agentMetrics {
		o.Metrics[k] = v
	}
	r.mu.Unlock()
	if agentRun != nil && err == nil && o.Metrics["gateway_calls"] == 0 && o.Metrics["harness_exit_code"] != 0 {
		err = &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("harness %s exited with code %v without calling the policy (the host's log has its output)",
			r.Req.Harness, o.Metrics["harness_exit_code"])}
	}
	out := &agent.Outcome{Status: trajectory.StatusCompleted, EndReason: "closed", FinalResponse: o.FinalText, Turns: o.Turns,
		Tokens: o.Tokens, Messages: o.Messages, Metrics: o.Metrics, Traces: o.Traces}
	r.mu.Lock()
	if c := r.closeReq; c != nil && c.FinalResponse != "" {
		out.FinalResponse = c.FinalResponse
	}
	if len(o.Traces) > 0 {
		e := *r.episode
		e.Tools = o.Tools
		r.episode = &e
	} else {
		out.Messages = r.episode.Messages
	}
	r.outcome = out
	if c := r.closeReq; c != nil && c.Reward != nil {
		r.score = &score{reward: *c.Reward, resolved: c.Resolved, metrics: c.Metrics}
	}
	r.mu.Unlock()
	return err
}

// sessionEpisode is a gateway rollout's budget when it has no domain.
func (p *Pipeline) sessionEpisode(r *Rollout) *agent.Episode {
	c := p.d.Cfg.Agent
	s := r.Req.Sampling
	ep := &agent.Episode{MaxTurns: c.MaxTurns, MaxTokensPerTurn: c.MaxTokensPerTurn, MaxTotalTokens: c.MaxTotalTokens,
		Temperature: 1, TopP: 1, Seed: s.Seed, Stop: s.Stop}
	if r.Req.MaxTurns > 0 {
		ep.MaxTurns = r.Req.MaxTurns
	}
	if s.MaxTokensPerTurn > 0 {
		ep.MaxTokensPerTurn = s.MaxTokensPerTurn
	}
	if s.MaxTotalTokens > 0 {
		ep.MaxTotalTokens = s.MaxTotalTokens
	}
	if s.Temperature != nil {
		ep.Temperature = *s.Temperature
	}
	if s.TopP != nil {
		ep.TopP = *s.TopP
	}
	if s.TopK != nil {
		ep.TopK = *s.TopK
	}
	return ep
}

// Episode is what a live rollout was prepared with: its initial messages
// and tools (a gateway session's agent starts from them).
func (r *Rollout) Episode() (msgs []trajectory.Message, tools []trajectory.Tool, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.episode == nil {
		return nil, nil, false
	}
	return r.episode.Messages, r.episode.Tools, true
}

// SessionLive is closed when a gateway rollout's session is live; wait on
// it together with Done (a rollout may end before its session starts).
func (r *Rollout) SessionLive() <-chan struct{} { return r.live }

// maxAuxRequests is a session's budget of calls that generate nothing:
// [gateway] max_requests_per_session, or 32 plus 4 a turn.
func maxAuxRequests(configured, turns int) int {
	if configured > 0 {
		return configured
	}
	return 32 + 4*turns
}
