package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/failover"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/sdk/wire"
)

func (p *Pipeline) plugin(r *Rollout) (*pluginhost.Plugin, error) {
	plug, ok := p.d.Plugins.Get(r.Req.Domain)
	if !ok {
		return nil, &agent.Error{Reason: trajectory.ReasonInvalidTask, Err: fmt.Errorf("no plugin serves domain %q", r.Req.Domain)}
	}
	return plug, nil
}

// crashRetries bounds how often one call is retried on restarted processes.
const crashRetries = 3

// call runs one RPC against the domain's plugin. A domain without
// per-process state (no CapRelease) survives a crash: a call that met the
// dead process is retried on its successor (Prepare, Setup, tool calls and
// Evaluate are pure functions of the request and the sandbox). A domain
// that keeps per-rollout state in its process is pinned to the process
// that prepared the rollout, and fails with plugin_crashed when it dies.
func (p *Pipeline) call(ctx context.Context, r *Rollout, method string, f func(pluginhost.Conn) error) error {
	plug, err := p.plugin(r)
	if err != nil {
		return err
	}
	return p.callPlugin(ctx, plug, r, method, f)
}

// callPlugin is call for a plugin; r (a rollout, or /v1/evaluate's stand-in)
// pins a stateful plugin's calls to the process that served the first of them.
func (p *Pipeline) callPlugin(ctx context.Context, plug *pluginhost.Plugin, r *Rollout, method string, f func(pluginhost.Conn) error) error {
	stateful := plug.Has(wire.CapRelease)
	for attempt := 0; ; attempt++ {
		c, err := plug.Acquire(ctx)
		if err != nil {
			return err
		}
		if stateful && r.epoch != 0 && c.Epoch != r.epoch {
			return plug.Check(r.epoch, nil)
		}
		start := time.Now()
		err = f(c)
		if p.d.Metrics != nil {
			p.d.Metrics.PluginCalls.WithLabelValues(plug.Name, method).Observe(time.Since(start).Seconds())
		}
		if err == nil {
			if r.epoch == 0 {
				r.epoch = c.Epoch
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = plug.Check(c.Epoch, err)
		if stateful || attempt == crashRetries || !errors.Is(err, pluginhost.ErrCrashed) {
			return err
		}
		p.d.Log.Warn("plugin call met a crashed process; retrying on its successor", "plugin", plug.Name, "method", method, "rollout", r.ID, "attempt", attempt+1)
		if p.d.Metrics != nil {
			p.d.Metrics.PluginRetries.WithLabelValues(plug.Name, method).Inc()
		}
		plug.AwaitRestart(ctx, c.Epoch)
	}
}

func (p *Pipeline) initStage(ctx context.Context, r *Rollout) error {
	if r.Req.Agent == AgentGateway && r.Req.Domain == "" {
		// A session without a task: its agent brings the prompt, and the
		// reward comes with the close.
		ep := p.sessionEpisode(r)
		r.mu.Lock()
		r.episode = ep
		r.mu.Unlock()
		return nil
	}
	plug, err := p.plugin(r)
	if err != nil {
		return err
	}
	resp, err := p.prepare(ctx, plug, r)
	if err != nil {
		return err
	}
	if len(resp.Diagnostics) > 0 {
		return diagErr(resp.Diagnostics[0])
	}
	if resp.EvalSandbox != nil && p.d.Sandboxes == nil {
		return &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: errors.New("the task is evaluated in a sandbox but sandboxes are disabled on this host ([sandbox] driver)")}
	}
	r.mu.Lock()
	r.evalSandbox = resp.EvalSandbox
	r.mu.Unlock()
	spec, err := p.rolloutSandbox(r, resp.Sandbox)
	if err != nil {
		return err
	}
	if spec != nil {
		if p.d.Sandboxes == nil {
			return &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: errors.New("the task needs a sandbox but sandboxes are disabled on this host ([sandbox] driver)")}
		}
		// Reserved now, started by the first host-service call: rollouts
		// that never run a command never pay for a sandbox.
		res := p.d.Sandboxes.Reserve(r.ID, *spec)
		r.mu.Lock()
		r.reserved, r.sandboxID = res, res.ID
		r.mu.Unlock()
		if plug.Has(wire.CapSetup) && resp.Sandbox != nil {
			var diags []pluginhost.Diagnostic
			err := p.call(ctx, r, "Setup", func(c pluginhost.Conn) (err error) {
				diags, err = c.Setup(ctx, r.ID, r.Req.Task, res.ID)
				return err
			})
			if err != nil {
				return err
			}
			if len(diags) > 0 {
				return diagErr(diags[0])
			}
		}
	}
	ep, err := p.episode(r, plug.Info(), resp)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.taskID, r.episode, r.finishTool = resp.TaskID, ep, finishToolOf(plug.Info())
	r.mu.Unlock()
	return nil
}

// prepare asks r's plugin for its episode. A domain whose Prepare depends
// on the task alone (CapTaskPrepare) and keeps no per-rollout state answers
// once for a task's rollouts that start together, a GRPO group: the answer
// is shared, read and never changed. The key holds the plugin's process
// generation (its configuration is set per process) and the task's bytes.
func (p *Pipeline) prepare(ctx context.Context, plug *pluginhost.Plugin, r *Rollout) (*pluginhost.Prepared, error) {
	call := func() (resp *pluginhost.Prepared, err error) {
		err = p.callPlugin(ctx, plug, r, "Prepare", func(c pluginhost.Conn) (err error) {
			resp, err = c.Prepare(ctx, r.ID, r.Req.Task)
			return err
		})
		return resp, err
	}
	if !plug.Has(wire.CapTaskPrepare) || plug.Has(wire.CapRelease) {
		return call()
	}
	key := plug.Name + "\x00" + strconv.FormatUint(plug.Epoch(), 10) + "\x00" + string(r.Req.Task)
	return p.prepares.Get(ctx, key, call)
}

func (p *Pipeline) episode(r *Rollout, info *pluginhost.Info, resp *pluginhost.Prepared) (*agent.Episode, error) {
	c := p.d.Cfg.Agent
	s := r.Req.Sampling
	lim := resp.Limits
	pick := func(req int, plugin uint32, def int) int {
		switch {
		case req > 0:
			return req
		case plugin > 0:
			return int(plugin)
		}
		return def
	}
	ep := &agent.Episode{
		MaxTurns:         pick(r.Req.MaxTurns, lim.MaxTurns, c.MaxTurns),
		MaxTokensPerTurn: pick(s.MaxTokensPerTurn, lim.MaxTokensPerTurn, c.MaxTokensPerTurn),
		MaxTotalTokens:   pick(s.MaxTotalTokens, lim.MaxTotalTokens, c.MaxTotalTokens),
		Temperature:      1, TopP: 1, Seed: s.Seed, Stop: s.Stop,
		MessageSpans: r.Req.MessageSpans, StrictLoopDetector: r.Req.Sampling.StrictLoopDetector,
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
	// A copy: the answer may be shared by a group (prepare's cache).
	ep.Messages = slices.Clone(resp.Messages)
	ep.Tools = p.tools.of(info, resp.Tools)
	if len(resp.ChatTemplateKwargs) > 0 {
		if err := json.Unmarshal(resp.ChatTemplateKwargs, &ep.TemplateKwargs); err != nil {
			return nil, &agent.Error{Reason: trajectory.ReasonInternal, Err: fmt.Errorf("plugin chat template kwargs: %w", err)}
		}
	}
	return ep, nil
}

// pluginTools dispatches the agent's tool calls to the rollout's plugin.
type pluginTools struct {
	p       *Pipeline
	r       *Rollout
	timeout time.Duration
	finish  string // the domain's builtin finish tool, answered here
}

func (t *pluginTools) Call(ctx context.Context, id, name string, args json.RawMessage) (agent.ToolResult, error) {
	if name != "" && name == t.finish {
		return builtinFinish(ctx, args)
	}
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	var resp *pluginhost.ToolResult
	err := t.p.call(ctx, t.r, "CallTool", func(c pluginhost.Conn) (err error) {
		resp, err = c.CallTool(ctx, t.r.ID, t.r.Req.Task, t.r.sandboxID, id, name, args)
		return err
	})
	if err != nil {
		return agent.ToolResult{}, err
	}
	if len(resp.Diagnostics) > 0 {
		return agent.ToolResult{}, diagErr(resp.Diagnostics[0])
	}
	return agent.ToolResult{Output: resp.Output, Done: resp.Done, FinalResponse: resp.FinalResponse, IsError: resp.IsError}, nil
}

// hintOf is what the pool's routing knows of the rollout.
func hintOf(r *Rollout) backend.Hint {
	return backend.Hint{Key: r.ID, Group: r.Req.GroupID, GroupSize: r.Req.GroupSize, Cost: float64(r.Req.Expected())}
}

// failover is r's backend, starting on lease.
func (p *Pipeline) failover(r *Rollout, lease *backend.Lease) *failover.Backend {
	return failover.New(failover.Deps{Pool: p.d.Pool, Gate: p.gate, Log: p.d.Log, Wait: p.d.Cfg.Backends.WaitForBackend.Duration,
		SaltPerPolicy: p.d.Cfg.Backends.CacheSaltPerPolicy},
		failover.Rollout{ID: r.ID, Hint: hintOf(r), Priority: r.Req.Priority, OnGenerate: r.generated, OnBackend: func(id string) {
			r.mu.Lock()
			r.backendID = id
			r.mu.Unlock()
		}}, lease)
}

func (p *Pipeline) runStage(ctx context.Context, r *Rollout) error {
	lease, err := p.d.Pool.AcquireFor(ctx, p.d.Cfg.Backends.WaitForBackend.Duration, hintOf(r))
	if err != nil {
		return err
	}
	fo := p.failover(r, lease)
	defer fo.Release()
	r.mu.Lock()
	r.backendID = lease.B.ID
	ep := *r.episode
	if r.Req.GroupSize > 1 {
		// Its group's rollouts share their first prompt: rendered once
		// (Runner.Prompts). The pool's backends serve one policy.
		ep.TokenizerSource = "model " + lease.B.Model
		if lease.B.Model == "" {
			ep.TokenizerSource = "backend " + lease.B.ID
		}
	}
	finish := r.finishTool
	r.outcome = &agent.Outcome{} // visible to summaries while running
	r.mu.Unlock()
	if r.Req.Agent == AgentGateway {
		return p.runSession(ctx, r, fo, lease.B.Model)
	}
	tools := &pluginTools{p: p, r: r, timeout: p.d.Cfg.Agent.ToolTimeout.Duration, finish: finish}
	out, err := p.runner.Run(ctx, ep, fo, lease.B.ID, p.splicer(lease.B), tools)
	r.mu.Lock()
	r.outcome = out
	r.mu.Unlock()
	if ae, ok := err.(*agent.Error); ok && ae.Reason == trajectory.ReasonContextOverflow {
		// A context overflow ends the rollout as truncated; it is still scored.
		out.Status = trajectory.StatusTruncated
		out.EndReason = trajectory.ReasonContextOverflow
		out.Failure = &trajectory.Failure{Stage: trajectory.StageRun, Reason: trajectory.ReasonContextOverflow, Message: ae.Err.Error()}
		return nil
	}
	return err
}

func (p *Pipeline) evalStage(ctx context.Context, r *Rollout) error {
	r.mu.Lock()
	out, scored := r.outcome, r.score != nil
	r.mu.Unlock()
	if scored {
		return nil // a session closed with its own reward
	}
	if r.Req.Domain == "" {
		return &agent.Error{Reason: trajectory.ReasonEvalFailed, Err: errors.New("the session has no task domain to score it, and was closed without a reward")}
	}
	// One of [pipeline] eval_workers' slots, shared with POST /v1/evaluate.
	select {
	case p.evalSlots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.evalSlots }()
	req := &pluginhost.EvaluateInput{RolloutID: r.ID, Task: r.Req.Task, SandboxID: r.sandboxID,
		FinalResponse: out.FinalResponse, Messages: out.Messages, EndReason: out.EndReason}
	r.mu.Lock()
	spec := r.evalSandbox
	r.mu.Unlock()
	if spec != nil {
		defer p.evalSandbox(ctx, r.ID, spec, req)()
	}
	var resp *pluginhost.Evaluation
	err := p.call(ctx, r, "Evaluate", func(c pluginhost.Conn) (err error) {
		resp, err = c.Evaluate(ctx, *req)
		return err
	})
	if err != nil {
		return err
	}
	if len(resp.Diagnostics) > 0 {
		return diagErr(resp.Diagnostics[0])
	}
	r.mu.Lock()
	r.score = &score{reward: resp.Reward, resolved: resp.Resolved, metrics: resp.Metrics, info: resp.Info}
	r.mu.Unlock()
	return nil
}

// sandboxSpec is a plugin's sandbox request in the manager's terms.
func sandboxSpec(sb *pluginhost.SandboxSpec) sandbox.Spec {
	return sandbox.Spec{Image: sb.Image, Network: sb.Network, Env: sb.Env, SeccompAllow: sb.SeccompAllow, Writable: sb.Writable, Limits: sandbox.Limits{
		CPUSeconds: uint64(sb.CPUSeconds), MemoryBytes: sb.MemoryBytes, MaxProcesses: uint64(sb.MaxProcesses), MaxFileBytes: sb.MaxFileBytes,
		DiskBytes: sb.DiskBytes}}
}

// evalSandbox reserves the fresh sandbox Evaluate asked for (started only
// if the plugin uses it) and returns its release. Once ctx is done (a
// cancel, a timeout) the release goes on in the background: the sandbox's
// processes die at once either way, and the rollout does not wait for the
// driver's own teardown (Apptainer's instance stop takes about 2 s).
func (p *Pipeline) evalSandbox(ctx context.Context, owner string, spec *pluginhost.SandboxSpec, req *pluginhost.EvaluateInput) func() {
	res := p.d.Sandboxes.Reserve(owner, sandboxSpec(spec))
	req.EvalSandboxID = res.ID
	release := func() {
		if err := res.Release(); err != nil {
			p.d.Log.Warn("eval sandbox stop", "owner", owner, "error", err)
		}
	}
	return func() {
		if ctx.Err() != nil {
			go release()
			return
		}
		release()
	}
}

// diagErr turns a plugin diagnostic into an agent error with its reason.
func diagErr(d pluginhost.Diagnostic) error {
	reason := trajectory.ReasonInternal
	switch d.Code {
	case wire.CodeInvalidTask, wire.CodeToolError, wire.CodeSandboxFailed, wire.CodeEvalFailed:
		reason = d.Code
	}
	msg := d.Message
	if d.Field != "" {
		msg = d.Field + ": " + msg
	}
	return &agent.Error{Reason: reason, Err: errors.New(msg)}
}
