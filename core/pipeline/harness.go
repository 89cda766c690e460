package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/trajectory"
)

// rolloutSandbox is the sandbox a rollout runs in: the domain's, and for
// a harness rollout (in the default image if the domain has none) with
// the harness shown read-only and the gateway as its only network.
func (p *Pipeline) rolloutSandbox(r *Rollout, sb *pluginhost.SandboxSpec) (*sandbox.Spec, error) {
	var spec *sandbox.Spec
	if sb != nil {
		s := sandboxSpec(sb)
		spec = &s
	}
	if r.Req.Harness == "" {
		return spec, nil
	}
	h, err := p.harness(r.Req.Harness)
	if err != nil {
		return nil, err
	}
	switch {
	case spec == nil:
		spec = &sandbox.Spec{Image: r.Req.HarnessImage}
	case spec.Image == "":
		// The domain takes the deployment's default image: the request may name another.
		spec.Image = r.Req.HarnessImage
	case r.Req.HarnessImage != "" && r.Req.HarnessImage != spec.Image:
		return nil, &agent.Error{Reason: trajectory.ReasonInvalidTask, Err: fmt.Errorf("harness.image %q: domain %s runs this task in an image of its own (%s)", r.Req.HarnessImage, r.Req.Domain, spec.Image)}
	}
	if spec.Network {
		// The domain's own network is not the harness's: a harness rollout
		// reaches the gateway and nothing else.
		spec.Network = false
	}
	spec.Binds = append(spec.Binds, sandbox.Bind{Host: h.Dir, Inside: config.HarnessInside})
	spec.Gateway = p.d.GatewaySocket
	return spec, nil
}

func (p *Pipeline) harness(name string) (*config.Harness, error) {
	h, ok := p.d.Cfg.Harnesses[name]
	if !ok || h == nil {
		return nil, &agent.Error{Reason: trajectory.ReasonInvalidTask, Err: fmt.Errorf("no harness %q is configured", name)}
	}
	if p.d.GatewaySocket == "" || p.d.Sandboxes == nil {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: errors.New("harness rollouts need sandboxes and the gateway's socket, which this host has not")}
	}
	if _, err := os.Stat(filepath.Join(h.Dir, ".prorl-installed")); err != nil {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("harness %q is not installed in %s (prorl-host harness install %s)", name, h.Dir, name)}
	}
	return h, nil
}

// harnessTail is how much of a harness's output is kept for its log line.
const harnessTail = 2000

// runHarness starts the rollout's harness in its sandbox and waits for it
// to exit. The harness talks to the policy through the session only.
func (p *Pipeline) runHarness(ctx context.Context, r *Rollout) (map[string]float64, error) {
	h, err := p.harness(r.Req.Harness)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	res, ep := r.reserved, r.episode
	r.mu.Unlock()
	sb, err := res.Sandbox(ctx)
	if err != nil {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("start the harness's sandbox: %w", err)}
	}
	instruction := r.Req.Instruction
	for i := len(ep.Messages) - 1; instruction == "" && i >= 0; i-- {
		if ep.Messages[i].Role == "user" {
			instruction = ep.Messages[i].Content
		}
	}
	env := map[string]string{}
	for k, v := range h.Env {
		env[k] = v
	}
	base := "http://" + sandbox.GatewayListen + "/gateway/" + r.ID
	env["OPENAI_BASE_URL"], env["OPENAI_API_KEY"] = base+"/v1", r.Req.SessionKey
	env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = base, r.Req.SessionKey
	env["PRORL_INSTRUCTION"], env["PRORL_SESSION_ID"] = instruction, r.ID
	env["PRORL_MAX_TURNS"] = strconv.Itoa(ep.MaxTurns)
	timeout := h.Timeout.Duration
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	start := time.Now()
	out, err := sb.Exec(ctx, []string{"bash", "-c", h.Run}, nil, timeout, r.Req.Workdir, env, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("run harness %s: %w", r.Req.Harness, err)}
	}
	m := map[string]float64{"harness_exit_code": float64(out.ExitCode), "harness_seconds": time.Since(start).Seconds()}
	if out.TimedOut {
		m["harness_timed_out"] = 1
	}
	p.d.Log.Info("harness exited", "rollout", r.ID, "harness", r.Req.Harness, "exit_code", out.ExitCode, "timed_out", out.TimedOut,
		"seconds", m["harness_seconds"], "stderr_tail", tail(out.Stderr), "stdout_tail", tail(out.Stdout))
	return m, nil
}

func tail(b []byte) string {
	if len(b) > harnessTail {
		b = b[len(b)-harnessTail:]
	}
	return string(b)
}
