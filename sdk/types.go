package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prorl/prorl/sdk/wire"
)

// APIVersion is the plugin protocol version this SDK speaks (go-plugin's
// ProtocolVersion). The host negotiates among the versions both sides know.
const APIVersion = wire.APIVersion

// Failure codes a domain may report; they are part of the host's fixed
// failure vocabulary.
const (
	CodeInvalidTask   = wire.CodeInvalidTask
	CodeToolError     = wire.CodeToolError
	CodeSandboxFailed = wire.CodeSandboxFailed
	// CodeEvalFailed: the evaluation ran but produced nothing to grade (no
	// test results: a collection crash, a missing env). Not a reward of 0.
	CodeEvalFailed = wire.CodeEvalFailed
	CodeInternal   = wire.CodeInternal
	// CodeInvalidConfig: the [plugins.NAME.config] table is wrong (Configure).
	CodeInvalidConfig = wire.CodeInvalidConfig
)

// Error is a domain failure with a code from the failure vocabulary. It
// travels in the reply as a diagnostic, never as a transport error.
type Error struct {
	Code    string
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, e.Field, e.Message)
	}
	return e.Code + ": " + e.Message
}

// InvalidTask reports a task the domain cannot run, naming the field at fault.
func InvalidTask(field, format string, args ...any) error {
	return &Error{Code: CodeInvalidTask, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errorf makes an Error with the given code.
func Errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error, wrapping unknown errors as internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// Capabilities the SDK declares for a domain from the interfaces it
// implements, so the host skips calls a domain does not need.
const (
	CapSetup   = wire.CapSetup   // implements Setupper
	CapRelease = wire.CapRelease // implements Releaser: keeps per-rollout state
	// CapTaskPrepare: Prepare's answer depends on the task and the
	// configuration alone, never on the rollout, so the host prepares a
	// task once for the rollouts of it that start together (a GRPO
	// group). An Env declares it with EpisodeByTask; another domain lists
	// it in Info.Capabilities. The host ignores it for a domain that keeps
	// per-rollout state (CapRelease), which must see every Prepare.
	CapTaskPrepare = wire.CapTaskPrepare
)

// Info describes a domain to the host.
type Info struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// DataSources are the ProRL data_source names routed to this domain; a
	// trailing * matches a prefix.
	DataSources  []string        `json:"data_sources,omitempty"`
	Tools        []Tool          `json:"-"`
	Capabilities []string        `json:"capabilities,omitempty"`
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
}

// Message is one chat message (OpenAI roles: system, user, assistant, tool).
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a call the model made.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// SandboxSpec asks the host for a sandbox (a nil Episode.Sandbox asks for
// none). Image names an image of the host's image directory; empty is the
// host's default image. Commands start in the sandbox's work directory
// (/work where the driver isolates).
type SandboxSpec struct {
	Image   string
	Network bool
	// Env is the environment of every command in the sandbox, over the
	// host's defaults (PATH, HOME, LANG) and under an ExecRequest's own.
	// Names are letters, digits and _, not first a digit.
	Env map[string]string
	// CPUSeconds and MaxFileBytes bind each process; MemoryBytes and
	// MaxProcesses the whole sandbox where the host has cgroups (each
	// process otherwise), DiskBytes its work directory.
	CPUSeconds   uint32
	MemoryBytes  uint64
	MaxProcesses uint32
	MaxFileBytes uint64
	DiskBytes    uint64
	// SeccompAllow names seccomp groups the commands need back from the
	// host's default filter: "ptrace", "namespaces", "io_uring".
	SeccompAllow []string
	// Writable are absolute directories of the image each sandbox gets its
	// own writable copy of, in place: a repository that an editable install
	// or a test runner finds at its image path, changed by the agent there.
	// Each is a tmpfs of DiskBytes holding what the image has at the path.
	Writable []string
}

// Limits bound an episode; zero fields take the request's or host's values.
type Limits struct {
	MaxTurns         int
	MaxTokensPerTurn int
	MaxTotalTokens   int
}

// PrepareRequest asks the domain to turn a task into an episode.
type PrepareRequest struct {
	RolloutID string
	Task      json.RawMessage
}

// Episode is everything the host needs to run a rollout of a task.
type Episode struct {
	TaskID   string
	Messages []Message
	// Tools the rollout may use, by name; nil means every tool of the domain.
	Tools   []string
	Sandbox *SandboxSpec
	// EvalSandbox asks the host for a fresh sandbox during Evaluate
	// (EvaluateRequest.EvalSandboxID), never the one the agent worked in.
	EvalSandbox        *SandboxSpec
	Limits             Limits
	ChatTemplateKwargs map[string]any
}

// SetupRequest runs after the sandbox started.
type SetupRequest struct {
	RolloutID string
	Task      json.RawMessage
	SandboxID string
	Sandboxes Sandboxes
}

// EvaluateRequest asks for the reward of a finished episode.
type EvaluateRequest struct {
	RolloutID     string
	Task          json.RawMessage
	SandboxID     string
	FinalResponse string
	Messages      []Message
	// EndReason says how the episode ended: finish, stop, max_turns, context_overflow, evaluate.
	EndReason string
	// EvalSandboxID is the fresh sandbox of Episode.EvalSandbox ("" when none).
	EvalSandboxID string
	Sandboxes     Sandboxes
}

// Score is a reward with its metrics. Info holds domain details (the
// extracted answer, a git patch) returned to the trainer as JSON.
type Score struct {
	Reward   float64
	Resolved bool
	Metrics  map[string]float64
	Info     map[string]any
}

// Domain is what a task-domain plugin implements.
type Domain interface {
	Info() Info
	// Configure receives the [plugins.NAME.config] table as JSON and the host's services.
	Configure(ctx context.Context, config json.RawMessage, host Sandboxes) error
	Prepare(ctx context.Context, req PrepareRequest) (*Episode, error)
	Evaluate(ctx context.Context, req EvaluateRequest) (*Score, error)
}

// Setupper is implemented by domains that run commands in the sandbox before the agent starts.
type Setupper interface {
	Setup(ctx context.Context, req SetupRequest) error
}

// Releaser is implemented by domains that keep per-rollout state.
type Releaser interface {
	Release(ctx context.Context, rolloutID string)
}

// Response is what the model answered: the finish tool's message, else the
// last assistant message (its final word when it stopped without finishing).
func (r EvaluateRequest) Response() string {
	if r.FinalResponse != "" {
		return r.FinalResponse
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "assistant" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Flag is a boolean as a 0/1 metric or reward.
func Flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
