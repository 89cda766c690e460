package sessions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/trajectory"
)

// Harnesses runs the configured agent harnesses in rollouts' sandboxes,
// each talking to the policy through its session only.
type Harnesses struct {
	Presets map[string]*config.Harness
	// GatewaySocket is the gateway's socket sandboxes reach; empty, or no
	// Sandboxes, and no harness can run.
	GatewaySocket string
	Sandboxes     bool
	Log           hclog.Logger
}

// Request is what a harness rollout asked for.
type Request struct {
	ID, Key     string // the rollout's id, its session's key
	Harness     string
	Image       string // the harness's image when the domain has none
	Instruction string // default: the last user message
	Workdir     string
	Domain      string // for errors
}

// Spec is the sandbox a harness rollout runs in: the domain's (spec; nil
// when it has none: the request's image), with the harness shown
// read-only and the gateway as its only network.
func (h *Harnesses) Spec(req Request, spec *sandbox.Spec) (*sandbox.Spec, error) {
	preset, err := h.preset(req.Harness)
	if err != nil {
		return nil, err
	}
	switch {
	case spec == nil:
		spec = &sandbox.Spec{Image: req.Image}
	case spec.Image == "":
		// The domain takes the deployment's default image: the request may name another.
		spec.Image = req.Image
	case req.Image != "" && req.Image != spec.Image:
		return nil, &agent.Error{Reason: trajectory.ReasonInvalidTask, Err: fmt.Errorf("harness.image %q: domain %s runs this task in an image of its own (%s)", req.Image, req.Domain, spec.Image)}
	}
	if spec.Network {
		// The domain's own network is not the harness's: a harness rollout
		// reaches the gateway and nothing else.
		spec.Network = false
	}
	spec.Binds = append(spec.Binds, sandbox.Bind{Host: preset.Dir, Inside: config.HarnessInside})
	spec.Gateway = h.GatewaySocket
	return spec, nil
}

func (h *Harnesses) preset(name string) (*config.Harness, error) {
	p, ok := h.Presets[name]
	if !ok || p == nil {
		return nil, &agent.Error{Reason: trajectory.ReasonInvalidTask, Err: fmt.Errorf("no harness %q is configured", name)}
	}
	if h.GatewaySocket == "" || !h.Sandboxes {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: errors.New("harness rollouts need sandboxes and the gateway's socket, which this host has not")}
	}
	if _, err := os.Stat(filepath.Join(p.Dir, ".prorl-installed")); err != nil {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("harness %q is not installed in %s (prorl-host harness install %s)", name, p.Dir, name)}
	}
	return p, nil
}

// harnessTail is how much of a harness's output is kept for its log line.
const harnessTail = 2000

// Run starts req's harness in its sandbox (started by sandbox) and waits
// for it to exit; ep is the rollout's episode (its turn budget, and its
// messages for the instruction when the request has none).
func (h *Harnesses) Run(ctx context.Context, req Request, ep *agent.Episode, start func(context.Context) (*sandbox.Sandbox, error)) (map[string]float64, error) {
	preset, err := h.preset(req.Harness)
	if err != nil {
		return nil, err
	}
	sb, err := start(ctx)
	if err != nil {
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("start the harness's sandbox: %w", err)}
	}
	instruction := req.Instruction
	for i := len(ep.Messages) - 1; instruction == "" && i >= 0; i-- {
		if ep.Messages[i].Role == "user" {
			instruction = ep.Messages[i].Content
		}
	}
	env := maps.Clone(preset.Env)
	if env == nil {
		env = map[string]string{}
	}
	base := "http://" + sandbox.GatewayListen + "/gateway/" + req.ID
	env["OPENAI_BASE_URL"], env["OPENAI_API_KEY"] = base+"/v1", req.Key
	env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = base, req.Key
	env["PRORL_INSTRUCTION"], env["PRORL_SESSION_ID"] = instruction, req.ID
	env["PRORL_MAX_TURNS"] = strconv.Itoa(ep.MaxTurns)
	timeout := preset.Timeout.Duration
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	t0 := time.Now()
	out, err := sb.Exec(ctx, []string{"bash", "-c", preset.Run}, nil, timeout, req.Workdir, env, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: fmt.Errorf("run harness %s: %w", req.Harness, err)}
	}
	m := map[string]float64{"harness_exit_code": float64(out.ExitCode), "harness_seconds": time.Since(t0).Seconds()}
	if out.TimedOut {
		m["harness_timed_out"] = 1
	}
	h.Log.Info("harness exited", "rollout", req.ID, "harness", req.Harness, "exit_code", out.ExitCode, "timed_out", out.TimedOut,
		"seconds", m["harness_seconds"], "stderr_tail", tail(out.Stderr), "stdout_tail", tail(out.Stdout))
	return m, nil
}

func tail(b []byte) string {
	if len(b) > harnessTail {
		b = b[len(b)-harnessTail:]
	}
	return string(b)
}
