package pipeline

import (
	"context"
	"encoding/json"

	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/sdk/wire"
)

// Tools a domain marks builtin (its ToolSpec.builtin) are answered here,
// by the contract's implementation (sdk/wire), which the SDK's runs too,
// without a round trip to the plugin: the finish tool ends nearly every
// episode, and its call was a third of a single-turn rollout's plugin calls.

// finishToolOf is the name of the domain's builtin finish tool ("" none).
func finishToolOf(info *pluginhost.Info) string {
	if info == nil {
		return ""
	}
	for _, t := range info.Tools {
		if t.Builtin == wire.BuiltinFinish {
			return t.Name
		}
	}
	return ""
}

// builtinFinish answers a call of the finish tool.
func builtinFinish(_ context.Context, raw json.RawMessage) (agent.ToolResult, error) {
	r := wire.Finish(raw)
	return agent.ToolResult{Output: r.Output, Done: r.Done, FinalResponse: r.FinalResponse, IsError: r.IsError}, nil
}
