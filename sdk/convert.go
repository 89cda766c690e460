package sdk

import (
	"encoding/json"

	pb "github.com/prorl/prorl/sdk/proto"
)

func messagesToProto(ms []Message) []*pb.Message {
	out := make([]*pb.Message, 0, len(ms))
	for _, m := range ms {
		pm := &pb.Message{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID, Name: m.Name}
		for _, c := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, &pb.ToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: c.Arguments})
		}
		out = append(out, pm)
	}
	return out
}

func messagesFromProto(ms []*pb.Message) []Message {
	out := make([]Message, 0, len(ms))
	for _, m := range ms {
		sm := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallId, Name: m.Name}
		for _, c := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, ToolCall{ID: c.Id, Name: c.Name, Arguments: json.RawMessage(c.ArgumentsJson)})
		}
		out = append(out, sm)
	}
	return out
}

func infoToProto(in Info) *pb.DomainInfo {
	d := &pb.DomainInfo{
		Name: in.Name, Version: in.Version, Description: in.Description,
		ApiVersions: []uint32{APIVersion}, DataSources: in.DataSources,
		Capabilities: in.Capabilities, ConfigSchemaJson: in.ConfigSchema,
	}
	for _, t := range in.Tools {
		s := t.Spec()
		d.Tools = append(d.Tools, &pb.ToolSpec{Name: s.Name, Description: s.Description, ParametersJson: s.Parameters, Builtin: s.Builtin})
	}
	return d
}

func diag(err error) []*pb.Diagnostic {
	if err == nil {
		return nil
	}
	e := AsError(err)
	return []*pb.Diagnostic{{Code: e.Code, Message: e.Message, Field: e.Field}}
}

func episodeToProto(ep *Episode) (*pb.PrepareResponse, error) {
	r := &pb.PrepareResponse{
		TaskId:   ep.TaskID,
		Messages: messagesToProto(ep.Messages),
		Tools:    ep.Tools,
		Limits: &pb.Limits{
			MaxTurns: uint32(ep.Limits.MaxTurns), MaxTokensPerTurn: uint32(ep.Limits.MaxTokensPerTurn),
			MaxTotalTokens: uint32(ep.Limits.MaxTotalTokens),
		},
	}
	r.Sandbox, r.EvalSandbox = ep.Sandbox.toProto(), ep.EvalSandbox.toProto()
	if len(ep.ChatTemplateKwargs) > 0 {
		b, err := json.Marshal(ep.ChatTemplateKwargs)
		if err != nil {
			return nil, Errorf(CodeInternal, "chat template kwargs: %v", err)
		}
		r.ChatTemplateKwargsJson = b
	}
	return r, nil
}

func (s *SandboxSpec) toProto() *pb.SandboxSpec {
	if s == nil {
		return nil
	}
	return &pb.SandboxSpec{
		Image: s.Image, Network: s.Network, Env: s.Env, CpuSeconds: s.CPUSeconds,
		MemoryBytes: s.MemoryBytes, MaxProcesses: s.MaxProcesses, MaxFileBytes: s.MaxFileBytes,
		DiskBytes: s.DiskBytes, SeccompAllow: s.SeccompAllow, Writable: s.Writable,
	}
}
