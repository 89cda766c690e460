package sandbox

import (
	"context"
	"time"

	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
)

// PluginServices serves the plugin protocol's HostServices (the sandbox
// calls of plugins) from a Manager.
type PluginServices struct {
	pb.UnimplementedHostServicesServer
	M *Manager
	// DefaultTimeout bounds a command that names none.
	DefaultTimeout time.Duration
}

func (h *PluginServices) timeout(ms uint32) time.Duration {
	if ms == 0 {
		return h.DefaultTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// Exec streams a command's output, then its exit.
func (h *PluginServices) Exec(req *pb.ExecRequest, stream pb.HostServices_ExecServer) error {
	if err := wire.CheckExec(req); err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	ctx := stream.Context()
	s, err := h.M.Lookup(ctx, req.SandboxId)
	if err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	var res *ExecResult
	if req.Session {
		res, err = s.Session(ctx, req.Command, h.timeout(req.TimeoutMs))
		if err == nil {
			err = stream.Send(&pb.ExecChunk{Stdout: res.Stdout, Stderr: res.Stderr})
		}
	} else {
		argv := req.Argv
		if len(argv) == 0 {
			argv = []string{"bash", "-c", req.Command}
		}
		res, err = s.Exec(ctx, argv, req.Stdin, h.timeout(req.TimeoutMs), req.Workdir, req.Env, func(o, e []byte) {
			_ = stream.Send(&pb.ExecChunk{Stdout: o, Stderr: e})
		})
	}
	if err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	return stream.Send(&pb.ExecChunk{Exited: true, ExitCode: int32(res.ExitCode), TimedOut: res.TimedOut, Truncated: res.Truncated})
}

// ReadFile reads a file in the sandbox.
func (h *PluginServices) ReadFile(ctx context.Context, req *pb.ReadFileRequest) (*pb.ReadFileResponse, error) {
	s, err := h.M.Lookup(ctx, req.SandboxId)
	if err != nil {
		return &pb.ReadFileResponse{Error: err.Error()}, nil
	}
	b, trunc, err := s.ReadFile(ctx, req.Path, req.MaxBytes)
	if err != nil {
		return &pb.ReadFileResponse{Error: err.Error()}, nil
	}
	return &pb.ReadFileResponse{Data: b, Truncated: trunc}, nil
}

// WriteFile writes a file in the sandbox.
func (h *PluginServices) WriteFile(ctx context.Context, req *pb.WriteFileRequest) (*pb.WriteFileResponse, error) {
	s, err := h.M.Lookup(ctx, req.SandboxId)
	if err != nil {
		return &pb.WriteFileResponse{Error: err.Error()}, nil
	}
	if err := s.WriteFile(ctx, req.Path, req.Data, req.Mode); err != nil {
		return &pb.WriteFileResponse{Error: err.Error()}, nil
	}
	return &pb.WriteFileResponse{}, nil
}

// ListDir lists a directory in the sandbox.
func (h *PluginServices) ListDir(ctx context.Context, req *pb.ListDirRequest) (*pb.ListDirResponse, error) {
	s, err := h.M.Lookup(ctx, req.SandboxId)
	if err != nil {
		return &pb.ListDirResponse{Error: err.Error()}, nil
	}
	ents, err := s.ListDir(ctx, req.Path)
	if err != nil {
		return &pb.ListDirResponse{Error: err.Error()}, nil
	}
	out := &pb.ListDirResponse{}
	for _, e := range ents {
		out.Entries = append(out.Entries, &pb.DirEntry{Name: e.Name, Dir: e.Dir, Size: e.Size, Mode: e.Mode})
	}
	return out, nil
}
