package pipeline

import (
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
)

// rolloutSandbox is the sandbox a rollout runs in: the domain's, and for
// a harness rollout the harness's (sessions.Harnesses.Spec).
func (p *Pipeline) rolloutSandbox(r *Rollout, sb *pluginhost.SandboxSpec) (*sandbox.Spec, error) {
	var spec *sandbox.Spec
	if sb != nil {
		s := sandboxSpec(sb)
		spec = &s
	}
	if r.Req.Harness == "" {
		return spec, nil
	}
	return p.harness.Spec(harnessRequest(r), spec)
}
