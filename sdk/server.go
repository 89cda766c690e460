package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
)

// server serves a Domain as the TaskDomain gRPC service.
type server struct {
	pb.UnimplementedTaskDomainServer
	d      Domain
	broker *plugin.GRPCBroker
	log    hclog.Logger
	tools  map[string]Tool

	mu   sync.RWMutex
	host Sandboxes
}

func newServer(d Domain, broker *plugin.GRPCBroker, log hclog.Logger) *server {
	s := &server{d: d, broker: broker, log: log, tools: map[string]Tool{}, host: noSandboxes{}}
	for _, t := range d.Info().Tools {
		s.tools[t.Spec().Name] = t
	}
	return s
}

func (s *server) currentSandboxes() Sandboxes {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.host
}

// guard turns a panic in domain code into a diagnostic, so one bad task
// cannot take down the plugin and every rollout it serves.
func (s *server) guard(op string, diags *[]*pb.Diagnostic) {
	if r := recover(); r != nil {
		s.log.Error("panic in domain", "op", op, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*diags = append(*diags, &pb.Diagnostic{Code: CodeInternal, Message: fmt.Sprintf("panic in %s: %v", op, r)})
	}
}

func (s *server) GetInfo(context.Context, *pb.GetInfoRequest) (*pb.DomainInfo, error) {
	info := infoToProto(s.d.Info())
	_, setup := s.d.(Setupper)
	_, release := s.d.(Releaser)
	taskPrepare := false
	if sd, ok := s.d.(sessionDomain); ok {
		setup, release, taskPrepare = sd.capabilities()
	}
	if setup {
		info.Capabilities = append(info.Capabilities, CapSetup)
	}
	for _, t := range s.tools {
		if _, ok := t.(ToolReleaser); ok {
			release = true
		}
	}
	if release {
		info.Capabilities = append(info.Capabilities, CapRelease)
	} else if taskPrepare { // state kept per rollout needs every Prepare
		info.Capabilities = append(info.Capabilities, CapTaskPrepare)
	}
	return info, nil
}

func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (resp *pb.ConfigureResponse, _ error) {
	resp = &pb.ConfigureResponse{}
	defer s.guard("Configure", &resp.Diagnostics)
	var h Sandboxes = noSandboxes{}
	if req.HostServicesBrokerId != 0 && s.broker != nil {
		conn, err := s.broker.DialWithOptions(req.HostServicesBrokerId, wire.DialOptions()...)
		if err != nil {
			resp.Diagnostics = diag(Errorf(CodeInternal, "dial host services: %v", err))
			return resp, nil
		}
		h = sandboxClient{c: pb.NewHostServicesClient(conn)}
	}
	s.mu.Lock()
	s.host = h
	s.mu.Unlock()
	cfg := json.RawMessage(req.ConfigJson)
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	resp.Diagnostics = diag(s.d.Configure(ctx, cfg, h))
	return resp, nil
}

func (s *server) Prepare(ctx context.Context, req *pb.PrepareRequest) (resp *pb.PrepareResponse, _ error) {
	resp = &pb.PrepareResponse{}
	defer s.guard("Prepare", &resp.Diagnostics)
	if !json.Valid(req.TaskJson) {
		resp.Diagnostics = diag(InvalidTask("task", "not valid JSON"))
		return resp, nil
	}
	ctx = withLog(ctx, s.log, req.RolloutId)
	ep, err := s.d.Prepare(ctx, PrepareRequest{RolloutID: req.RolloutId, Task: req.TaskJson})
	if err != nil {
		resp.Diagnostics = diag(err)
		return resp, nil
	}
	if ep == nil {
		resp.Diagnostics = diag(Errorf(CodeInternal, "the domain's Prepare returned neither an episode nor an error"))
		return resp, nil
	}
	if len(ep.Messages) == 0 {
		resp.Diagnostics = diag(Errorf(CodeInternal, "the domain's Prepare returned an episode without messages"))
		return resp, nil
	}
	for _, name := range ep.Tools {
		if _, ok := s.tools[name]; !ok {
			resp.Diagnostics = diag(Errorf(CodeInternal, "episode names tool %q the domain does not declare", name))
			return resp, nil
		}
	}
	r, err := episodeToProto(ep)
	if err != nil {
		resp.Diagnostics = diag(err)
		return resp, nil
	}
	return r, nil
}

func (s *server) Setup(ctx context.Context, req *pb.SetupRequest) (resp *pb.SetupResponse, _ error) {
	resp = &pb.SetupResponse{}
	defer s.guard("Setup", &resp.Diagnostics)
	if su, ok := s.d.(Setupper); ok {
		ctx = withLog(ctx, s.log, req.RolloutId)
		resp.Diagnostics = diag(su.Setup(ctx, SetupRequest{
			RolloutID: req.RolloutId, Task: req.TaskJson, SandboxID: req.SandboxId, Sandboxes: s.currentSandboxes(),
		}))
	}
	return resp, nil
}

func (s *server) CallTool(ctx context.Context, req *pb.CallToolRequest) (resp *pb.CallToolResponse, _ error) {
	resp = &pb.CallToolResponse{}
	defer s.guard("CallTool", &resp.Diagnostics)
	if req.Call == nil {
		resp.IsError, resp.Output = true, "Error: empty tool call"
		return resp, nil
	}
	t, ok := s.tools[req.Call.Name]
	if !ok {
		resp.IsError = true
		resp.Output = fmt.Sprintf("Error: unknown tool %q; available tools: %s", req.Call.Name, s.toolNames())
		return resp, nil
	}
	args, bad := ToolArgs(req.Call.ArgumentsJson)
	if bad != nil {
		resp.IsError, resp.Output = bad.IsError, bad.Output
		return resp, nil
	}
	ctx = withLog(ctx, s.log, req.RolloutId)
	tc := ToolContext{RolloutID: req.RolloutId, SandboxID: req.SandboxId, Task: req.TaskJson, Sandboxes: s.currentSandboxes()}
	if sd, ok := s.d.(sessionDomain); ok {
		sess, err := sd.toolSession(tc)
		if err != nil {
			resp.Diagnostics = diag(err)
			return resp, nil
		}
		tc.session = sess
	}
	res, err := ToolOutcome(t.Call(ctx, tc, args))
	if err != nil {
		resp.Diagnostics = diag(err)
		return resp, nil
	}
	resp.Output, resp.Done, resp.FinalResponse, resp.IsError = res.Output, res.Done, res.FinalResponse, res.IsError
	return resp, nil
}

func (s *server) toolNames() string {
	out := ""
	for _, t := range s.d.Info().Tools {
		if out != "" {
			out += ", "
		}
		out += t.Spec().Name
	}
	return out
}

func (s *server) Evaluate(ctx context.Context, req *pb.EvaluateRequest) (resp *pb.EvaluateResponse, _ error) {
	resp = &pb.EvaluateResponse{}
	defer s.guard("Evaluate", &resp.Diagnostics)
	ctx = withLog(ctx, s.log, req.RolloutId)
	sc, err := s.d.Evaluate(ctx, EvaluateRequest{
		RolloutID: req.RolloutId, Task: req.TaskJson, SandboxID: req.SandboxId, FinalResponse: req.FinalResponse,
		Messages: messagesFromProto(req.Messages), EndReason: req.EndReason, EvalSandboxID: req.EvalSandboxId, Sandboxes: s.currentSandboxes(),
	})
	if err != nil {
		resp.Diagnostics = diag(err)
		return resp, nil
	}
	if sc == nil {
		resp.Diagnostics = diag(Errorf(CodeInternal, "the domain's Evaluate returned neither a score nor an error"))
		return resp, nil
	}
	resp.Reward, resp.Resolved, resp.Metrics = sc.Reward, sc.Resolved, sc.Metrics
	if len(sc.Info) > 0 {
		b, err := json.Marshal(sc.Info)
		if err != nil {
			resp.Diagnostics = diag(Errorf(CodeInternal, "score info: %v", err))
			return resp, nil
		}
		resp.InfoJson = b
	}
	return resp, nil
}

func (s *server) Release(ctx context.Context, req *pb.ReleaseRequest) (resp *pb.ReleaseResponse, _ error) {
	resp = &pb.ReleaseResponse{}
	var diags []*pb.Diagnostic
	defer s.guard("Release", &diags)
	if r, ok := s.d.(Releaser); ok {
		r.Release(withLog(ctx, s.log, req.RolloutId), req.RolloutId)
	}
	for _, t := range s.tools {
		if r, ok := t.(ToolReleaser); ok {
			r.Release(req.RolloutId)
		}
	}
	return resp, nil
}
