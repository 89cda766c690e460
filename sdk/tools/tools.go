// Package tools holds the standard tools any domain includes by name.
package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/wire"
)

// Think lets the model reason in a tool call; it changes nothing.
func Think() sdk.Tool {
	return sdk.FuncTool{
		S: sdk.ToolSpec{
			Name:        "think",
			Description: "Use the tool to think about something. It will not obtain new information or change anything, but just log the thought. Use it when complex reasoning is needed.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"thought":{"type":"string","description":"The thought to log."}},"required":["thought"]}`),
		},
		F: func(_ context.Context, _ sdk.ToolContext, args json.RawMessage) (sdk.ToolResult, error) {
			var a struct {
				Thought string `json:"thought"`
			}
			if err := sdk.DecodeArgs(args, &a); err != nil {
				return sdk.ToolResult{}, err
			}
			return sdk.ToolResult{Output: "Your thought has been logged."}, nil
		},
	}
}

// Finish ends the episode; its message is the final response that the
// domain's reward function scores.
func Finish() sdk.Tool {
	// The contract's finish (sdk/wire), which a host may run itself.
	return sdk.FuncTool{
		S: sdk.ToolSpec{Name: wire.FinishName, Description: wire.FinishDescription,
			Parameters: json.RawMessage(wire.FinishParameters), Builtin: wire.BuiltinFinish},
		F: func(_ context.Context, _ sdk.ToolContext, args json.RawMessage) (sdk.ToolResult, error) {
			r := wire.Finish(args)
			return sdk.ToolResult{Output: r.Output, Done: r.Done, FinalResponse: r.FinalResponse, IsError: r.IsError}, nil
		},
	}
}

// Standard returns the standard tools by name, so a domain can list names.
func Standard(names ...string) ([]sdk.Tool, error) {
	all := map[string]func() sdk.Tool{"think": Think, "finish": Finish, "bash": Bash, "python": Python,
		"str_replace_editor": func() sdk.Tool { return StrReplaceEditor() }}
	out := make([]sdk.Tool, 0, len(names))
	for _, n := range names {
		f, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("no standard tool %q", n)
		}
		out = append(out, f())
	}
	return out, nil
}

// AnswerEpisode is the episode of a domain whose model reasons and answers:
// a system and a user message, the think and finish tools, and python
// (with a sandbox started only if it is called) when python is set.
func AnswerEpisode(taskID, system, user string, maxTurns int, python bool, image string) *sdk.Episode {
	ep := &sdk.Episode{
		TaskID:   taskID,
		Messages: []sdk.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
		Tools:    []string{"think", "finish"},
		Limits:   sdk.Limits{MaxTurns: maxTurns},
	}
	if python {
		ep.Tools = []string{"think", "python", "finish"}
		// No network: the answer is not on the internet's side of the sandbox.
		ep.Sandbox = &sdk.SandboxSpec{Image: image}
	}
	return ep
}
