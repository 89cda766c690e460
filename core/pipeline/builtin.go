package pipeline

import (
	"context"
	"encoding/json"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/tools"
)

// Tools a domain marks builtin (its ToolSpec.builtin) are answered here,
// by the SDK's own implementation and as the SDK's server answers a call,
// without a round trip to the plugin: the finish tool ends nearly every
// episode, and its call was a third of a single-turn rollout's plugin calls.

// finishToolOf is the name of the domain's builtin finish tool ("" none).
func finishToolOf(info *pb.DomainInfo) string {
	for _, t := range info.GetTools() {
		if t.GetBuiltin() == "finish" {
			return t.GetName()
		}
	}
	return ""
}

var finishTool = tools.Finish()

// builtinFinish answers a call of the finish tool.
func builtinFinish(ctx context.Context, raw json.RawMessage) (agent.ToolResult, error) {
	args, bad := sdk.ToolArgs(raw)
	if bad != nil {
		return agent.ToolResult{IsError: bad.IsError, Output: bad.Output}, nil
	}
	res, err := sdk.ToolOutcome(finishTool.Call(ctx, sdk.ToolContext{}, args))
	if err != nil {
		return agent.ToolResult{}, err
	}
	return agent.ToolResult{Output: res.Output, Done: res.Done, FinalResponse: res.FinalResponse, IsError: res.IsError}, nil
}
