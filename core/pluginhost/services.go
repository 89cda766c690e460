package pluginhost

import (
	"context"
	"fmt"
	"time"

	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
)

// Sandboxes is what a plugin reaches through the host services: the
// sandbox manager's commands and files, in Go terms. nil: the host has no
// sandbox driver, and every call says so.
type Sandboxes interface {
	// Exec runs a command, streaming its output to out.
	Exec(ctx context.Context, req ExecRequest, out func(stdout, stderr []byte)) (ExecResult, error)
	ReadFile(ctx context.Context, sandboxID, path string, maxBytes uint64) (data []byte, truncated bool, err error)
	WriteFile(ctx context.Context, sandboxID, path string, data []byte, mode uint32) error
	ListDir(ctx context.Context, sandboxID, path string) ([]DirEntry, error)
}

// ExecRequest is a command a plugin runs in a sandbox: argv, or command
// in bash (in the sandbox's session shell when Session).
type ExecRequest struct {
	SandboxID string
	Argv      []string
	Command   string
	Session   bool
	Timeout   time.Duration // 0: the host's default
	Stdin     []byte
	Workdir   string
	Env       map[string]string
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode            int
	TimedOut, Truncated bool
}

// DirEntry is one entry of a sandbox directory.
type DirEntry struct {
	Name string
	Dir  bool
	Size uint64
	Mode uint32
}

// HostServices serves the plugin protocol's host services from s (nil:
// none): the one place their protobuf types meet the host's.
func HostServices(s Sandboxes) pb.HostServicesServer { return &hostServices{s: s} }

type hostServices struct {
	pb.UnimplementedHostServicesServer
	s Sandboxes
}

func noDriver(id string) string {
	return fmt.Sprintf("sandbox %q: this host has no sandbox driver configured", id)
}

func (h *hostServices) Exec(req *pb.ExecRequest, stream pb.HostServices_ExecServer) error {
	if h.s == nil {
		return stream.Send(&pb.ExecChunk{Error: noDriver(req.SandboxId)})
	}
	if err := wire.CheckExec(req); err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	res, err := h.s.Exec(stream.Context(), ExecRequest{SandboxID: req.SandboxId, Argv: req.Argv, Command: req.Command, Session: req.Session,
		Timeout: time.Duration(req.TimeoutMs) * time.Millisecond, Stdin: req.Stdin, Workdir: req.Workdir, Env: req.Env},
		func(o, e []byte) { _ = stream.Send(&pb.ExecChunk{Stdout: o, Stderr: e}) })
	if err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	return stream.Send(&pb.ExecChunk{Exited: true, ExitCode: int32(res.ExitCode), TimedOut: res.TimedOut, Truncated: res.Truncated})
}

func (h *hostServices) ReadFile(ctx context.Context, req *pb.ReadFileRequest) (*pb.ReadFileResponse, error) {
	if h.s == nil {
		return &pb.ReadFileResponse{Error: noDriver(req.SandboxId)}, nil
	}
	b, trunc, err := h.s.ReadFile(ctx, req.SandboxId, req.Path, req.MaxBytes)
	if err != nil {
		return &pb.ReadFileResponse{Error: err.Error()}, nil
	}
	return &pb.ReadFileResponse{Data: b, Truncated: trunc}, nil
}

func (h *hostServices) WriteFile(ctx context.Context, req *pb.WriteFileRequest) (*pb.WriteFileResponse, error) {
	if h.s == nil {
		return &pb.WriteFileResponse{Error: noDriver(req.SandboxId)}, nil
	}
	if err := h.s.WriteFile(ctx, req.SandboxId, req.Path, req.Data, req.Mode); err != nil {
		return &pb.WriteFileResponse{Error: err.Error()}, nil
	}
	return &pb.WriteFileResponse{}, nil
}

func (h *hostServices) ListDir(ctx context.Context, req *pb.ListDirRequest) (*pb.ListDirResponse, error) {
	if h.s == nil {
		return &pb.ListDirResponse{Error: noDriver(req.SandboxId)}, nil
	}
	ents, err := h.s.ListDir(ctx, req.SandboxId, req.Path)
	if err != nil {
		return &pb.ListDirResponse{Error: err.Error()}, nil
	}
	out := &pb.ListDirResponse{}
	for _, e := range ents {
		out.Entries = append(out.Entries, &pb.DirEntry{Name: e.Name, Dir: e.Dir, Size: e.Size, Mode: e.Mode})
	}
	return out, nil
}
