package wire

import (
	"bytes"
	"encoding/json"
)

// What a host and a domain agree on besides the messages of sdk/proto:
// the names of capabilities and failure codes, and the built-in finish
// tool, which a host may answer itself without a round trip to the
// plugin. The SDK re-exports these; a host needs nothing else of the SDK.

// Capabilities a domain declares in its DomainInfo.
const (
	CapSetup   = "setup"   // it implements Setup
	CapRelease = "release" // it keeps per-rollout state and wants Release
	// CapTaskPrepare: Prepare's answer depends on the task and the
	// configuration alone, never on the rollout, so a host may prepare a
	// task once for the rollouts of it that start together (a GRPO group).
	// A host ignores it for a domain that keeps per-rollout state.
	CapTaskPrepare = "task_prepare"
)

// Failure codes a domain reports in its diagnostics: part of the host's
// fixed failure vocabulary.
const (
	CodeInvalidTask   = "invalid_task"
	CodeToolError     = "tool_error"
	CodeSandboxFailed = "sandbox_failed"
	// CodeEvalFailed: the evaluation ran but produced nothing to grade (no
	// test results: a collection crash, a missing env). Not a reward of 0.
	CodeEvalFailed = "eval_failed"
	CodeInternal   = "internal"
	// CodeInvalidConfig: the [plugins.NAME.config] table is wrong (Configure).
	CodeInvalidConfig = "invalid_config"
)

// The built-in finish tool: a domain marks its finish tool builtin
// (ToolSpec.builtin = BuiltinFinish) and a host answers its calls with
// Finish, the code the SDK's own finish tool runs.
const (
	BuiltinFinish     = "finish"
	FinishName        = "finish"
	FinishDescription = "Signals that the task is complete. Put the final answer in the message."
	FinishParameters  = `{"type":"object","properties":{"message":{"type":"string","description":"The final answer and a short summary."}},"required":["message"]}`
)

// FinishResult is the finish tool's answer as the model sees it.
type FinishResult struct {
	Output        string
	Done          bool
	FinalResponse string
	IsError       bool
}

// Finish answers a call of the finish tool with its raw arguments: the
// episode ends with the message as its final response, or the model is
// told what was wrong with the arguments (unknown fields included).
func Finish(raw []byte) FinishResult {
	args := bytes.TrimSpace(raw)
	if len(args) == 0 {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return FinishResult{IsError: true, Output: "Error: tool arguments are not valid JSON"}
	}
	var a struct {
		Message       string `json:"message"`
		TaskCompleted any    `json:"task_completed,omitempty"` // OpenHands sends it; accepted and ignored
	}
	if err := DecodeStrict(args, &a); err != nil {
		return FinishResult{IsError: true, Output: "Error: invalid arguments: " + err.Error()}
	}
	return FinishResult{Output: "Task finished.", Done: true, FinalResponse: a.Message}
}

// DecodeStrict decodes one JSON value into v, refusing fields v does not
// have; empty input is an empty object.
func DecodeStrict(raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
