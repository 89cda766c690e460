package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prorl/prorl/sdk/wire"
)

// ToolSpec describes a tool to the model; Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Builtin names a behaviour the host implements itself, so a call costs
	// no round trip to the plugin: "finish" (tools.Finish). The tool's own
	// Call must behave the same (it serves hosts that predate this).
	Builtin string `json:"builtin,omitempty"`
}

// ToolContext is what a tool call can see of its rollout.
type ToolContext struct {
	RolloutID string
	SandboxID string
	Task      json.RawMessage
	Sandboxes Sandboxes
	// session is the rollout of an Env, or for a stateless Env a function
	// that builds it (set by the server for RolloutTool).
	session any
}

// ToolResult is the observation of a call. Done ends the episode with
// FinalResponse as the answer (the finish tool).
type ToolResult struct {
	Output        string
	Done          bool
	FinalResponse string
	IsError       bool
}

// Tool is one tool a domain offers. A Call error is shown to the model as an
// error observation, except an *Error with a code other than tool_error, which
// fails the rollout with that code.
type Tool interface {
	Spec() ToolSpec
	Call(ctx context.Context, tc ToolContext, args json.RawMessage) (ToolResult, error)
}

// ToolReleaser is implemented by tools that keep per-rollout state (the
// editor's undo history); the SDK releases them with the rollout.
type ToolReleaser interface {
	Release(rolloutID string)
}

// ToolArgs are a call's arguments as a tool gets them: empty is {}. Not
// valid JSON, they are refused with the observation the model is shown.
// The SDK's server and a host answering a builtin tool both use it.
func ToolArgs(raw []byte) (json.RawMessage, *ToolResult) {
	args := json.RawMessage(raw)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, &ToolResult{IsError: true, Output: "Error: tool arguments are not valid JSON"}
	}
	return args, nil
}

// ToolOutcome is what a tool's Call answered as the model sees it: an error
// becomes an error observation, except an *Error with a code other than
// tool_error, which is returned (it fails the rollout).
func ToolOutcome(res ToolResult, err error) (ToolResult, error) {
	if err == nil {
		return res, nil
	}
	var se *Error
	if errors.As(err, &se) && se.Code != CodeToolError {
		return ToolResult{}, err
	}
	return ToolResult{IsError: true, Output: "Error: " + AsError(err).Message}, nil
}

// DecodeArgs decodes tool arguments strictly into v, so a model that invents
// an argument gets told so rather than having it silently ignored.
func DecodeArgs(args json.RawMessage, v any) error {
	if err := decodeStrict(args, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// DecodeConfig decodes a domain's [plugins.NAME.config] table strictly:
// an unknown key is an invalid_config error naming the domain.
func DecodeConfig(domain string, raw json.RawMessage, v any) error {
	if err := decodeStrict(raw, v); err != nil {
		return Errorf(CodeInvalidConfig, "%s config: %v", domain, err)
	}
	return nil
}

// decodeStrict decodes JSON refusing unknown fields; empty means {}.
func decodeStrict(raw json.RawMessage, v any) error { return wire.DecodeStrict(raw, v) }

// FuncTool adapts a function into a Tool.
type FuncTool struct {
	S ToolSpec
	F func(ctx context.Context, tc ToolContext, args json.RawMessage) (ToolResult, error)
}

func (f FuncTool) Spec() ToolSpec { return f.S }

func (f FuncTool) Call(ctx context.Context, tc ToolContext, args json.RawMessage) (ToolResult, error) {
	return f.F(ctx, tc, args)
}
