package pluginhost

import (
	"context"

	"github.com/prorl/prorl/core/trajectory"
	pb "github.com/prorl/prorl/sdk/proto"
)

// The domain client in Go terms: the generated protobuf types stop here,
// and the rest of the host sees these.

// Diagnostic is a domain's account of a problem with a task, a tool call
// or a score: a code of the wire contract, a message, the field at fault.
type Diagnostic struct{ Code, Message, Field string }

// ToolSpec is one tool a domain offers.
type ToolSpec struct {
	Name, Description string
	Parameters        []byte // JSON Schema
	// Builtin names a tool the host answers itself (wire.BuiltinFinish).
	Builtin string
}

// Info is what a domain says of itself at start.
type Info struct {
	Name, Version, Description string
	APIVersions                []uint32
	DataSources                []string
	Tools                      []ToolSpec
	Capabilities               []string
	ConfigSchema               []byte
}

// SandboxSpec is the sandbox a domain asks for.
type SandboxSpec struct {
	Image        string
	Network      bool
	Env          map[string]string
	CPUSeconds   uint32
	MemoryBytes  uint64
	MaxProcesses uint32
	MaxFileBytes uint64
	DiskBytes    uint64
	SeccompAllow []string
	Writable     []string
}

// Limits are a domain's bounds on an episode (0: the host's).
type Limits struct{ MaxTurns, MaxTokensPerTurn, MaxTotalTokens uint32 }

// Prepared is a domain's episode for a rollout.
type Prepared struct {
	Messages []trajectory.Message
	// Tools names the tools the rollout may use; empty: all of the domain's.
	Tools       []string
	Sandbox     *SandboxSpec
	EvalSandbox *SandboxSpec // a fresh sandbox to score in, if any
	Limits      Limits
	TaskID      string
	// ChatTemplateKwargs is JSON for the chat template (enable_thinking).
	ChatTemplateKwargs []byte
	Diagnostics        []Diagnostic
}

// ToolResult is a domain's answer to a tool call.
type ToolResult struct {
	Output        string
	Done          bool
	FinalResponse string
	IsError       bool
	Diagnostics   []Diagnostic
}

// EvaluateInput is what a domain scores.
type EvaluateInput struct {
	RolloutID, SandboxID, EvalSandboxID string
	Task                                []byte
	FinalResponse, EndReason            string
	Messages                            []trajectory.Message
}

// Evaluation is a domain's score.
type Evaluation struct {
	Reward      float64
	Resolved    bool
	Metrics     map[string]float64
	Info        []byte // JSON
	Diagnostics []Diagnostic
}

// Conn is a call handle valid for one plugin process lifetime.
type Conn struct {
	rpc   pb.TaskDomainClient
	Epoch uint64
}

// Prepare asks for a rollout's episode.
func (c Conn) Prepare(ctx context.Context, rolloutID string, task []byte) (*Prepared, error) {
	r, err := c.rpc.Prepare(ctx, &pb.PrepareRequest{RolloutId: rolloutID, TaskJson: task})
	if err != nil {
		return nil, err
	}
	out := &Prepared{Messages: messagesOf(r.Messages), Tools: r.Tools, Sandbox: sandboxOf(r.Sandbox), EvalSandbox: sandboxOf(r.EvalSandbox),
		TaskID: r.TaskId, ChatTemplateKwargs: r.ChatTemplateKwargsJson, Diagnostics: diagnosticsOf(r.Diagnostics)}
	if l := r.Limits; l != nil {
		out.Limits = Limits{MaxTurns: l.MaxTurns, MaxTokensPerTurn: l.MaxTokensPerTurn, MaxTotalTokens: l.MaxTotalTokens}
	}
	return out, nil
}

// Setup runs the domain's setup in the rollout's sandbox.
func (c Conn) Setup(ctx context.Context, rolloutID string, task []byte, sandboxID string) ([]Diagnostic, error) {
	r, err := c.rpc.Setup(ctx, &pb.SetupRequest{RolloutId: rolloutID, TaskJson: task, SandboxId: sandboxID})
	if err != nil {
		return nil, err
	}
	return diagnosticsOf(r.Diagnostics), nil
}

// CallTool runs one tool call.
func (c Conn) CallTool(ctx context.Context, rolloutID string, task []byte, sandboxID, callID, name string, args []byte) (*ToolResult, error) {
	r, err := c.rpc.CallTool(ctx, &pb.CallToolRequest{RolloutId: rolloutID, TaskJson: task, SandboxId: sandboxID,
		Call: &pb.ToolCall{Id: callID, Name: name, ArgumentsJson: args}})
	if err != nil {
		return nil, err
	}
	return &ToolResult{Output: r.Output, Done: r.Done, FinalResponse: r.FinalResponse, IsError: r.IsError, Diagnostics: diagnosticsOf(r.Diagnostics)}, nil
}

// Evaluate scores a rollout.
func (c Conn) Evaluate(ctx context.Context, in EvaluateInput) (*Evaluation, error) {
	msgs := make([]*pb.Message, 0, len(in.Messages))
	for _, m := range in.Messages {
		pm := &pb.Message{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, &pb.ToolCall{Id: tc.ID, Name: tc.Function.Name, ArgumentsJson: []byte(tc.Function.Arguments)})
		}
		msgs = append(msgs, pm)
	}
	r, err := c.rpc.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: in.RolloutID, TaskJson: in.Task, SandboxId: in.SandboxID,
		FinalResponse: in.FinalResponse, Messages: msgs, EndReason: in.EndReason, EvalSandboxId: in.EvalSandboxID})
	if err != nil {
		return nil, err
	}
	return &Evaluation{Reward: r.Reward, Resolved: r.Resolved, Metrics: r.Metrics, Info: r.InfoJson, Diagnostics: diagnosticsOf(r.Diagnostics)}, nil
}

// Release ends the domain's state for a rollout.
func (c Conn) Release(ctx context.Context, rolloutID string) error {
	_, err := c.rpc.Release(ctx, &pb.ReleaseRequest{RolloutId: rolloutID})
	return err
}

func messagesOf(ms []*pb.Message) []trajectory.Message {
	if len(ms) == 0 {
		return nil
	}
	out := make([]trajectory.Message, 0, len(ms))
	for _, m := range ms {
		tm := trajectory.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallId, Name: m.Name}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, trajectory.ToolCall{ID: tc.Id, Type: "function", Function: trajectory.FunctionCall{Name: tc.Name, Arguments: string(tc.ArgumentsJson)}})
		}
		out = append(out, tm)
	}
	return out
}

func sandboxOf(s *pb.SandboxSpec) *SandboxSpec {
	if s == nil {
		return nil
	}
	return &SandboxSpec{Image: s.Image, Network: s.Network, Env: s.Env, CPUSeconds: s.CpuSeconds, MemoryBytes: s.MemoryBytes,
		MaxProcesses: s.MaxProcesses, MaxFileBytes: s.MaxFileBytes, DiskBytes: s.DiskBytes, SeccompAllow: s.SeccompAllow, Writable: s.Writable}
}

func diagnosticsOf(ds []*pb.Diagnostic) []Diagnostic {
	if len(ds) == 0 {
		return nil
	}
	out := make([]Diagnostic, len(ds))
	for i, d := range ds {
		out[i] = Diagnostic{Code: d.Code, Message: d.Message, Field: d.Field}
	}
	return out
}

func infoOf(i *pb.DomainInfo) *Info {
	if i == nil {
		return nil
	}
	out := &Info{Name: i.Name, Version: i.Version, Description: i.Description, APIVersions: i.ApiVersions, DataSources: i.DataSources,
		Capabilities: i.Capabilities, ConfigSchema: i.ConfigSchemaJson}
	for _, t := range i.Tools {
		out.Tools = append(out.Tools, ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.ParametersJson, Builtin: t.Builtin})
	}
	return out
}
