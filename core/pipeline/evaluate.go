package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prorl/prorl/core/pluginhost"
)

// Evaluate scores a response without generation (POST /v1/evaluate).
func (p *Pipeline) Evaluate(ctx context.Context, domain string, task json.RawMessage, response string) (*pluginhost.Evaluation, error) {
	plug, ok := p.d.Plugins.Get(domain)
	if !ok {
		return nil, fmt.Errorf("unknown domain %q", domain)
	}
	// The eval stage's bound: an evaluation may start a sandbox and run a
	// test suite, as a rollout's does, and takes one of the same slots.
	select {
	case p.evalSlots <- struct{}{}:
		defer func() { <-p.evalSlots }()
	default:
		return nil, fmt.Errorf("%w (%d, [pipeline] eval_workers)", ErrEvalBusy, cap(p.evalSlots))
	}
	id := NewID("eval-")
	req := &pluginhost.EvaluateInput{RolloutID: id, Task: task, FinalResponse: response, EndReason: "evaluate"}
	// As a rollout does: Prepare (which checks the task, opens the domain's
	// session and says whether scoring needs a fresh sandbox), Evaluate,
	// Release; pinned to one plugin process like a rollout's calls.
	ro := &Rollout{ID: id, Req: Request{Domain: domain}}
	var prep *pluginhost.Prepared
	err := p.callPlugin(ctx, plug, ro, "Prepare", func(c pluginhost.Conn) (err error) {
		prep, err = c.Prepare(ctx, id, task)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(prep.Diagnostics) > 0 {
		return &pluginhost.Evaluation{Diagnostics: prep.Diagnostics}, nil
	}
	if plug := p.holder(ro); plug != nil {
		defer p.release(plug, ro)
	}
	if prep.EvalSandbox != nil {
		if p.d.Sandboxes == nil {
			return nil, errors.New("the domain evaluates in a sandbox but sandboxes are disabled on this host ([sandbox] driver)")
		}
		defer p.evalSandbox(ctx, id, prep.EvalSandbox, req)()
	}
	var r *pluginhost.Evaluation
	err = p.callPlugin(ctx, plug, ro, "Evaluate", func(c pluginhost.Conn) (err error) {
		r, err = c.Evaluate(ctx, *req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
