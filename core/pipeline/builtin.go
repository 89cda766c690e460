package pipeline

import (
	"bytes"
	"encoding/json" // the error texts the model sees are encoding/json's, as the SDK's
	"fmt"

	"github.com/prorl/prorl/core/agent"
	pb "github.com/prorl/prorl/sdk/proto"
)

// Tools a domain marks builtin (its ToolSpec.builtin) are answered here, as
// the SDK's own implementation answers them, without a round trip to the
// plugin: the finish tool ends nearly every episode, and its call was a
// third of a single-turn rollout's plugin calls.

// finishToolOf is the name of the domain's builtin finish tool ("" none).
func finishToolOf(info *pb.DomainInfo) string {
	for _, t := range info.GetTools() {
		if t.GetBuiltin() == "finish" {
			return t.GetName()
		}
	}
	return ""
}

// builtinFinish answers a call of the finish tool as the SDK's tools.Finish
// does through the SDK's server: the same observations, errors included.
func builtinFinish(args json.RawMessage) agent.ToolResult {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return agent.ToolResult{IsError: true, Output: "Error: tool arguments are not valid JSON"}
	}
	var a struct {
		Message       string `json:"message"`
		TaskCompleted any    `json:"task_completed,omitempty"` // OpenHands sends it; accepted and ignored
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return agent.ToolResult{IsError: true, Output: fmt.Sprintf("Error: invalid arguments: %v", err)}
	}
	return agent.ToolResult{Output: "Task finished.", Done: true, FinalResponse: a.Message}
}
