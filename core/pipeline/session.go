package pipeline

import (
	"context"
	"errors"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/failover"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/sessions"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// Errors of CloseSession.
var (
	ErrNoSession     = errors.New("no open session with this id")
	ErrSessionClosed = sessions.ErrClosed
)

// Gateway is the host's LLM gateway; the API serves its routes.
func (p *Pipeline) Gateway() *gateway.Gateway { return p.gw }

// CloseSession ends a gateway rollout's session; the rollout goes on to
// eval (or straight to its result with the given reward). A session still
// in init is closed as soon as it starts.
func (p *Pipeline) CloseSession(id string, c sessions.Close) error {
	r, ok := p.Lookup(id)
	if !ok || r.Req.Agent != AgentGateway {
		return ErrNoSession
	}
	return r.session.Close(c)
}

// runSession is the run stage of a gateway rollout: the session is live
// on the rollout's sticky backend until it is closed, cancelled or timed
// out; its traces are the rollout's trajectory either way. A harness
// rollout runs its harness in its sandbox as the session's agent.
func (p *Pipeline) runSession(ctx context.Context, r *Rollout, fo *failover.Backend, model string) error {
	r.mu.Lock()
	ep := *r.episode
	r.mu.Unlock()
	var tok tokenizer.Tokenizer = fo
	if p.runner.Local != nil {
		tok = p.runner.Local
	}
	lease := fo.Lease()
	cfg := session.Config{ID: r.ID, Key: r.Req.SessionKey, Model: model, Gen: fo, BackendID: lease.B.ID,
		Tok: tok, Splicer: p.splicer(lease.B), Parser: p.runner.Parser, Policy: p.gate.Version,
		MaxCalls: ep.MaxTurns, MaxTokensPerCall: ep.MaxTokensPerTurn, MaxTotalTokens: ep.MaxTotalTokens,
		MaxConcurrent: p.d.Cfg.Gateway.MaxConcurrentPerSession, MaxRequests: sessions.MaxAuxRequests(p.d.Cfg.Gateway.MaxRequestsPerSession, ep.MaxTurns),
		Temperature: ep.Temperature, TopP: ep.TopP, TopK: ep.TopK, Seed: ep.Seed, Stop: ep.Stop, TemplateKwargs: ep.TemplateKwargs,
		Log: p.d.Log.Named("gateway")}
	var run sessions.AgentRun
	if r.Req.Harness != "" {
		run = func(ctx context.Context) (map[string]float64, error) {
			r.mu.Lock()
			res := r.reserved
			r.mu.Unlock()
			return p.harness.Run(ctx, harnessRequest(r), &ep, res.Sandbox)
		}
	}
	so, err := r.session.Run(ctx, p.gw, cfg, run, r.Req.Harness)
	o := so.Outcome
	out := &agent.Outcome{Status: trajectory.StatusCompleted, EndReason: "closed", FinalResponse: o.FinalText, Turns: o.Turns,
		Tokens: o.Tokens, Messages: o.Messages, Metrics: o.Metrics, Traces: o.Traces}
	r.mu.Lock()
	if c := so.Close; c != nil && c.FinalResponse != "" {
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
	if c := so.Close; c != nil && c.Reward != nil {
		r.score = &score{reward: *c.Reward, resolved: c.Resolved, metrics: c.Metrics}
	}
	r.mu.Unlock()
	return err
}

// harnessRequest is what a harness rollout asked for.
func harnessRequest(r *Rollout) sessions.Request {
	return sessions.Request{ID: r.ID, Key: r.Req.SessionKey, Harness: r.Req.Harness, Image: r.Req.HarnessImage,
		Instruction: r.Req.Instruction, Workdir: r.Req.Workdir, Domain: r.Req.Domain}
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
func (r *Rollout) SessionLive() <-chan struct{} { return r.session.Live() }
